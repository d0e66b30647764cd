"""Locations: where a table lives (local disk or object storage) and how each engine reaches it.

A location is a URI: a local path, ``file://``, ``s3://`` (``s3a://``), ``az://``, ``abfs[s]://`` or
``gs://``. From it and the standard variables the cloud SDKs and delta-rs read (``AWS_*``,
``AZURE_STORAGE_*``, ``GOOGLE_*``), plus a view's own ``storage_options`` (registered with
:func:`register_options`), this module derives:

- :func:`delta_options`: delta-rs ``storage_options`` (every Delta log read and commit);
- :func:`filesystem`: a pyarrow filesystem and the path within it, for everything mvsink reads or
  writes outside Spark (staging files and manifests, listings, deletes, compaction's reads); the
  file helpers below (:func:`read_text`, :func:`write_text`, :func:`list_dir`, ...) use it;
- :func:`spark_uri` and :func:`spark_hadoop_conf`: Spark's view of the same place (``s3://`` is
  ``s3a://`` there, ``az://`` is ``abfss://``), credentials only by reference to the environment;

The probe that refuses a store whose put-if-absent does not hold is :mod:`mvsink.core.probe`.

Local paths behave exactly as before: the helpers then use the local filesystem.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mvsink import settings
from mvsink.exceptions import StoreError

if TYPE_CHECKING:
    import pyarrow.fs as pafs

    from mvsink.definitions.view import ViewDefinition

log = logging.getLogger(__name__)

S3_SCHEMES = ("s3", "s3a")
AZURE_SCHEMES = ("az", "abfs", "abfss", "adl", "azure")
GCS_SCHEMES = ("gs", "gcs")

#: Environment variables passed to delta-rs (and read for pyarrow and Spark), per kind of store.
S3_ENV = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ALLOW_HTTP",
    "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
    "AWS_S3_LOCKING_PROVIDER",
    "AWS_S3_ALLOW_UNSAFE_RENAME",
    "AWS_CONDITIONAL_PUT",
    "AWS_PROFILE",
)
AZURE_ENV = (
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_USE_EMULATOR",
    "AZURE_STORAGE_CLIENT_ID",
    "AZURE_STORAGE_CLIENT_SECRET",
    "AZURE_STORAGE_TENANT_ID",
    "AZURE_CLIENT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_TENANT_ID",
    "AZURE_ALLOW_HTTP",
)
GCS_ENV = ("GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_PATH", "GOOGLE_APPLICATION_CREDENTIALS")

#: The Azure storage emulator's (Azurite's) published development key, used when ``use_emulator`` is on.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="  # noqa: S105


@dataclasses.dataclass(frozen=True)
class Location:
    """A parsed location: ``kind`` is ``local``, ``s3``, ``azure`` or ``gcs``."""

    uri: str  # as delta-rs takes it: an absolute local path, or scheme://bucket/key (s3a:// read as s3://)
    kind: str
    scheme: str  # the URI's scheme ("" for a local path)
    bucket: str  # bucket or container ("" for a local path)
    key: str  # the path inside the bucket (no leading slash); the absolute path for a local location
    account: str = ""  # Azure: the account named in an abfs[s]:// URI (container@account.dfs...)

    @property
    def is_local(self) -> bool:
        return self.kind == "local"


def is_uri(value: str) -> bool:
    """True if ``value`` names a location by URI (``scheme://...``), not a local path."""
    scheme = urlsplit(value).scheme
    return len(scheme) > 1 and "://" in value


def parse(uri: str) -> Location:
    """The location ``uri`` names; a clear error for a scheme mvsink cannot reach."""
    if not is_uri(uri):
        return Location(uri=uri, kind="local", scheme="", bucket="", key=uri)
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme == "file":
        path = parts.path or "/"
        return Location(uri=path, kind="local", scheme="", bucket="", key=path)
    key = parts.path.strip("/")
    if scheme in S3_SCHEMES:
        return Location(uri=_join_uri("s3", parts.netloc, key), kind="s3", scheme="s3", bucket=parts.netloc, key=key)
    if scheme in AZURE_SCHEMES:
        container, _, host = parts.netloc.partition("@")
        account = host.split(".", 1)[0] if host else ""
        return Location(uri=uri.rstrip("/"), kind="azure", scheme=scheme, bucket=container, key=key, account=account)
    if scheme in GCS_SCHEMES:
        return Location(uri=_join_uri("gs", parts.netloc, key), kind="gcs", scheme="gs", bucket=parts.netloc, key=key)
    raise StoreError(
        f"location {uri}: scheme {scheme}:// is not supported. Fix: use a local path, file://, s3://, s3a://, "
        "az://, abfs[s]:// or gs://."
    )


def _join_uri(scheme: str, bucket: str, key: str) -> str:
    return f"{scheme}://{bucket}/{key}" if key else f"{scheme}://{bucket}"


def normalize(uri: str) -> str:
    """The canonical form of a location (``s3a://`` as ``s3://``, ``file://`` as a path, no trailing slash)."""
    return parse(uri).uri


def join(base: str, *parts: str) -> str:
    """``base`` with ``parts`` appended (``/``-separated for URIs; ``os.path`` rules for local paths)."""
    import os

    if not is_uri(base):
        return os.path.join(base, *parts)
    return posixpath.join(base.rstrip("/"), *(p.strip("/") for p in parts))


# ---------------------------------------------------------------- per-location options (a view's storage_options)

_registered: dict[str, dict[str, str]] = {}
_lock = threading.Lock()


def register_options(prefix: str, options: Mapping[str, str]) -> None:
    """Use ``options`` (already resolved, e.g. from a view's ``storage_options``) for locations under ``prefix``.

    They take precedence over the environment. Values are never logged.
    """
    with _lock:
        _registered[normalize(prefix).rstrip("/")] = {k.upper(): str(v) for k, v in options.items()}


def register_view(view: ViewDefinition) -> None:
    """Register a view's ``storage_options`` (references read from the environment) for its target and its
    path sources on object storage."""
    if not view.storage_options:
        return
    opts = view.resolved_storage_options()
    for location in (view.target, *(s.path for s in view.sources if s.path)):
        if is_uri(location) and not parse(location).is_local:
            register_options(location, opts)


def _registered_for(loc: Location) -> dict[str, str]:
    best: tuple[int, dict[str, str]] | None = None
    with _lock:
        for prefix, opts in _registered.items():
            if (loc.uri == prefix or loc.uri.startswith(prefix + "/")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), opts)
    return dict(best[1]) if best else {}


def _env_for(loc: Location) -> dict[str, str]:
    names = {"s3": S3_ENV, "azure": AZURE_ENV, "gcs": GCS_ENV}.get(loc.kind, ())
    out = settings.env_subset(names)
    out.update(_registered_for(loc))
    return out


def emulator_url() -> str:
    """The Azure storage emulator's blob endpoint (``AZURITE_BLOB_STORAGE_URL``, as delta-rs reads it)."""
    return settings.env_subset(["AZURITE_BLOB_STORAGE_URL"]).get("AZURITE_BLOB_STORAGE_URL") or "http://127.0.0.1:10000"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def delta_options(uri: str) -> dict[str, str] | None:
    """delta-rs ``storage_options`` for ``uri``: None for a local path (delta-rs needs none)."""
    loc = parse(uri)
    if loc.is_local:
        return None
    opts = _env_for(loc)
    if loc.kind == "s3":
        if "AWS_ENDPOINT_URL" not in opts and "AWS_ENDPOINT_URL_S3" in opts:
            opts["AWS_ENDPOINT_URL"] = opts.pop("AWS_ENDPOINT_URL_S3")
        opts.pop("AWS_ENDPOINT_URL_S3", None)
        if "AWS_REGION" not in opts and "AWS_DEFAULT_REGION" in opts:
            opts["AWS_REGION"] = opts["AWS_DEFAULT_REGION"]
        opts.pop("AWS_DEFAULT_REGION", None)
        opts.pop("AWS_PROFILE", None)
        if opts.get("AWS_ENDPOINT_URL", "").startswith("http://"):
            opts.setdefault("AWS_ALLOW_HTTP", "true")
    if loc.kind == "azure" and _truthy(opts.get("AZURE_STORAGE_USE_EMULATOR")):
        opts.setdefault("AZURE_STORAGE_ACCOUNT_NAME", AZURITE_ACCOUNT)
        opts.setdefault("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY)
    return opts


# ---------------------------------------------------------------- pyarrow filesystems

_fs_cache: dict[tuple[str, str, tuple[tuple[str, str], ...]], Any] = {}


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem for ``uri`` and the path of ``uri`` within it."""
    loc = parse(uri)
    if loc.is_local:
        import pyarrow.fs as pafs

        return pafs.LocalFileSystem(), loc.key
    opts = delta_options(uri) or {}
    cache_key = (loc.kind, container_uri(loc) if loc.kind == "azure" else "", tuple(sorted(opts.items())))
    fs = _fs_cache.get(cache_key)
    if fs is None:
        fs = _make_fs(loc, opts)
        _fs_cache[cache_key] = fs
    if loc.kind == "azure":  # rooted at the container
        return fs, loc.key
    return fs, posixpath.join(loc.bucket, loc.key) if loc.key else loc.bucket


def container_uri(loc: Location) -> str:
    """The URI of the bucket or container that holds ``loc``."""
    if loc.kind == "azure":
        parts = urlsplit(loc.uri)
        return f"{parts.scheme}://{parts.netloc}"
    return _join_uri(loc.scheme, loc.bucket, "")


def _make_fs(loc: Location, opts: dict[str, str]) -> Any:
    import pyarrow.fs as pafs

    if loc.kind == "s3":
        endpoint = opts.get("AWS_ENDPOINT_URL")
        kw: dict[str, Any] = {}
        if endpoint:
            parts = urlsplit(endpoint)
            kw["endpoint_override"] = parts.netloc or endpoint
            kw["scheme"] = parts.scheme or "https"
        if "AWS_ACCESS_KEY_ID" in opts:
            kw["access_key"] = opts["AWS_ACCESS_KEY_ID"]
            kw["secret_key"] = opts.get("AWS_SECRET_ACCESS_KEY", "")
            if "AWS_SESSION_TOKEN" in opts:
                kw["session_token"] = opts["AWS_SESSION_TOKEN"]
        if "AWS_REGION" in opts:
            kw["region"] = opts["AWS_REGION"]
        if _truthy(opts.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST")):
            kw["force_virtual_addressing"] = True
        return pafs.S3FileSystem(**kw)
    if loc.kind == "azure":
        # pyarrow's AzureFileSystem does not sign requests the emulator accepts; delta-rs's own object
        # store (the one every commit goes through) does, with the same options: wrap it as a pyarrow
        # filesystem rooted at the container.
        from deltalake.fs import DeltaStorageHandler

        return pafs.PyFileSystem(DeltaStorageHandler(container_uri(loc), opts))
    if loc.kind == "gcs":
        return pafs.GcsFileSystem()
    raise StoreError(f"location {loc.uri}: no filesystem for kind {loc.kind}")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One listed file or folder."""

    name: str  # base name
    is_dir: bool
    size: int
    mtime_ms: int  # last-modified time (the store's, on object storage); 0 if unknown


def _io(uri: str, what: str, exc: Exception) -> StoreError:
    return StoreError(
        f"location {uri}: {what} failed: {type(exc).__name__}: {exc}. Fix: check the store is reachable and the "
        "credentials allow it, then retry."
    )


_NOT_FOUND = ("not found", "not_found", "nosuchkey", "no such key", "does not exist", "blobnotfound", "404")


def _not_found(exc: OSError) -> bool:
    """The error says the object is not there (each store and client words it its own way)."""
    if isinstance(exc, FileNotFoundError):
        return True
    text = str(exc).lower()
    return any(w in text for w in _NOT_FOUND)


def list_dir(uri: str) -> list[Entry]:
    """The entries directly under ``uri`` (empty if it does not exist)."""
    import pyarrow.fs as pafs

    fs, path = filesystem(uri)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=False))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise _io(uri, "listing", exc) from exc
    out = []
    for i in infos:
        mtime = i.mtime_ns // 1_000_000 if i.mtime_ns is not None else 0
        out.append(Entry(i.base_name, i.type == pafs.FileType.Directory, int(i.size or 0), int(mtime)))
    return out


def list_files(uri: str) -> list[tuple[str, int]]:
    """Every file under ``uri`` recursively: (path relative to ``uri``, last-modified ms)."""
    import pyarrow.fs as pafs

    fs, path = filesystem(uri)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=True))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise _io(uri, "listing", exc) from exc
    base = path.rstrip("/") + "/"
    return [
        (i.path[len(base) :] if i.path.startswith(base) else i.base_name, (i.mtime_ns or 0) // 1_000_000)
        for i in infos
        if i.type == pafs.FileType.File
    ]


def info(uri: str) -> Entry | None:
    """The file or folder at ``uri``, None if there is none."""
    import pyarrow.fs as pafs

    fs, path = filesystem(uri)
    try:
        i = fs.get_file_info(path)
    except OSError as exc:
        raise _io(uri, "reading file info", exc) from exc
    if i.type == pafs.FileType.NotFound:
        return None
    mtime = i.mtime_ns // 1_000_000 if i.mtime_ns is not None else 0
    return Entry(i.base_name, i.type == pafs.FileType.Directory, int(i.size or 0), int(mtime))


def exists(uri: str) -> bool:
    return info(uri) is not None


def read_bytes(uri: str) -> bytes | None:
    """The file's content, None if it does not exist."""
    fs, path = filesystem(uri)
    try:
        with fs.open_input_stream(path) as f:
            return bytes(f.read())
    except OSError as exc:
        if _not_found(exc):  # also when it went away between a listing and this read
            return None
        raise _io(uri, "reading", exc) from exc


def read_text(uri: str) -> str | None:
    data = read_bytes(uri)
    return None if data is None else data.decode()


def write_text(uri: str, text: str) -> None:
    """Write ``text`` to ``uri`` so that readers see the old content or the new, never a partial file.

    Local: a temporary file renamed over it. Object stores: one PUT (atomic there).
    """
    import os

    if not is_uri(uri) or parse(uri).is_local:
        path = parse(uri).key
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        return
    write_bytes(uri, text.encode())


def write_bytes(uri: str, data: bytes) -> None:
    """Write ``data`` to ``uri`` in one request (object stores; local paths: a plain write)."""
    import pyarrow.fs as pafs

    fs, path = filesystem(uri)
    try:
        if isinstance(fs, pafs.PyFileSystem):
            # delta-rs's handler stream takes bytes, not the Buffer pyarrow's wrapper passes it
            raw = fs.handler._handler.open_output_stream(path, None)
            raw.write(data)
            raw.close()
        else:
            if parse(uri).is_local:
                fs.create_dir(posixpath.dirname(path), recursive=True)
            with fs.open_output_stream(path) as f:
                f.write(data)
    except OSError as exc:
        raise _io(uri, "writing", exc) from exc


def delete_file(uri: str) -> None:
    """Delete one file (nothing if it does not exist)."""
    fs, path = filesystem(uri)
    try:
        fs.delete_file(path)
    except OSError as exc:
        if _not_found(exc):
            return
        raise _io(uri, "deleting", exc) from exc


def delete_dir(uri: str) -> None:
    """Delete a folder and everything under it (nothing if it does not exist)."""
    import shutil

    loc = parse(uri)
    if loc.is_local:
        shutil.rmtree(loc.key, ignore_errors=True)
        return
    fs, path = filesystem(uri)
    try:
        fs.delete_dir(path)
    except OSError as exc:
        if _not_found(exc):
            return
        raise _io(uri, "deleting", exc) from exc


# ---------------------------------------------------------------- Spark's view of a location


def spark_uri(uri: str) -> str:
    """The URI Spark (Hadoop) reads ``uri`` by: ``s3://`` is ``s3a://``, ``az://`` is ``abfss://`` (the
    account from ``AZURE_STORAGE_ACCOUNT_NAME``); local paths and ``gs://`` stay as they are."""
    loc = parse(uri)
    if loc.kind == "s3":
        return _join_uri("s3a", loc.bucket, loc.key)
    if loc.kind == "azure" and loc.scheme in ("az", "azure", "adl"):
        account = (_env_for(loc).get("AZURE_STORAGE_ACCOUNT_NAME") or "").strip()
        if not account:
            raise StoreError(
                f"location {uri}: Spark reads Azure through abfss://container@account.dfs.core.windows.net/..., "
                "and no account is known. Fix: set AZURE_STORAGE_ACCOUNT_NAME, or write the location as abfss://."
            )
        host = f"{loc.bucket}@{account}.dfs.core.windows.net"
        return f"abfss://{host}/{loc.key}" if loc.key else f"abfss://{host}"
    return loc.uri


def spark_hadoop_conf(uri: str) -> dict[str, str]:
    """``spark.hadoop.*`` settings for Spark to reach ``uri`` (no secrets: credentials by reference to the
    environment of the driver and executors)."""
    loc = parse(uri)
    if loc.kind == "s3":
        opts = delta_options(uri) or {}
        conf = {
            "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "spark.hadoop.fs.s3a.aws.credentials.provider": (
                "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
                if "AWS_ACCESS_KEY_ID" in opts
                else "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
            ),
        }
        endpoint = opts.get("AWS_ENDPOINT_URL")
        if endpoint:
            conf["spark.hadoop.fs.s3a.endpoint"] = endpoint
            conf["spark.hadoop.fs.s3a.path.style.access"] = str(
                not _truthy(opts.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST"))
            ).lower()
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(not endpoint.startswith("http://")).lower()
        if "AWS_REGION" in opts:
            conf["spark.hadoop.fs.s3a.endpoint.region"] = opts["AWS_REGION"]
        return conf
    if loc.kind == "azure":
        return {"spark.hadoop.fs.abfss.impl": "org.apache.hadoop.fs.azurebfs.SecureAzureBlobFileSystem"}
    if loc.kind == "gcs":
        return {"spark.hadoop.fs.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem"}
    return {}
