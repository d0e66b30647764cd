"""The storage layer: how mvsink reaches a location (local disk or object storage) outside Spark.

A location is a :class:`mvsink.location.Location` (parsed once, with the view file's ``storage_options`` as
written). Every function below takes a :class:`~mvsink.location.Location` or a plain URI (options from the
environment only), and derives:

- :func:`options`: the store settings that reach it (the standard variables ``AWS_*``, ``AZURE_STORAGE_*``,
  ``GOOGLE_*``, overridden by the view's ``storage_options``, references read from the environment);
- :func:`delta_options`: delta-rs ``storage_options`` (every Delta log read and commit);
- :func:`filesystem`: a pyarrow filesystem and the path within it, for everything mvsink reads or
  writes outside Spark; the file helpers (:func:`read_text`, :func:`write_text`, :func:`list_dir`, ...) use it;
- :func:`store_error`, :func:`check_container`: a store's refusal as bad input (missing bucket, refused
  credentials, naming the variable or option to fix), secrets scrubbed from every message.

Spark's view of a location is :mod:`mvsink.core.sparklocation`; the probe that refuses a store whose
put-if-absent does not hold is :mod:`mvsink.core.probe`. Local paths use the local filesystem.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mvsink import settings
from mvsink.definitions.view import resolve_storage_options
from mvsink.exceptions import MissingBucketError, MvSinkError, StoreAccessError, StoreError
from mvsink.location import Location, Where, is_secret_option, parse, uri_of

if TYPE_CHECKING:
    import pyarrow.fs as pafs

log = logging.getLogger(__name__)


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


def options(where: Where) -> dict[str, str]:
    """The store settings that reach a location, in delta-rs's names: the standard variables of its kind of
    store, overridden by the view file's ``storage_options`` (references read from the environment now; an
    unset one fails naming it). Secret values are in it: never log it. Empty for a local path."""
    loc = parse(where)
    if loc.is_local:
        return {}
    names = {"s3": S3_ENV, "azure": AZURE_ENV, "gcs": GCS_ENV}.get(loc.kind, ())
    opts = settings.env_subset(names)
    if loc.kind == "azure":
        opts.update(settings.env_subset(["AZURITE_BLOB_STORAGE_URL"]))
    if loc.storage_options:
        given = {name: (kind, value) for name, kind, value in loc.storage_options}
        opts.update(resolve_storage_options(loc.view or loc.uri, given))
    return _normalise(loc, opts)


def _options_key(loc: Location) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(options(loc).items()))


def _normalise(loc: Location, opts: dict[str, str]) -> dict[str, str]:
    """delta-rs's spelling of the options: one endpoint and region name, http allowed for an http endpoint,
    the emulator's account and well-known key."""
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
    if loc.kind == "azure" and truthy(opts.get("AZURE_STORAGE_USE_EMULATOR")):
        opts.setdefault("AZURE_STORAGE_ACCOUNT_NAME", AZURITE_ACCOUNT)
        opts.setdefault("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY)
    return opts


def emulator_url(where: Where | None = None) -> str:
    """The Azure storage emulator's blob endpoint (``AZURITE_BLOB_STORAGE_URL``, as delta-rs reads it)."""
    if where is not None:
        url = options(where).get("AZURITE_BLOB_STORAGE_URL")
        if url:
            return url
    return settings.env_subset(["AZURITE_BLOB_STORAGE_URL"]).get("AZURITE_BLOB_STORAGE_URL") or "http://127.0.0.1:10000"


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def delta_options(where: Where) -> dict[str, str] | None:
    """delta-rs ``storage_options`` for a location: None for a local path (delta-rs needs none)."""
    loc = parse(where)
    if loc.is_local:
        return None
    opts = options(loc)
    opts.pop("AZURITE_BLOB_STORAGE_URL", None)  # delta-rs reads it from the environment only
    return opts


# ---------------------------------------------------------------- errors from the store, as the user's to fix

_NO_BUCKET = ("nosuchbucket", "containernotfound", "the specified bucket does not exist", "bucket not found")
_DENIED = (
    "invalidaccesskeyid",
    "signaturedoesnotmatch",
    "accessdenied",
    "access denied",
    "authenticationfailed",
    "authorizationfailure",
    "authorizationpermissionmismatch",
    "invalidauthenticationinfo",
    "forbidden",
    "status: 403",
    "403 forbidden",
    "http 403",
    "(403)",
)

#: The options that authenticate, per kind of store: what a refused request names to fix.
CREDENTIAL_OPTIONS = {
    "s3": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    "azure": ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_TOKEN"),
    "gcs": ("GOOGLE_SERVICE_ACCOUNT", "GOOGLE_APPLICATION_CREDENTIALS"),
}


def scrub(text: str, where: Where | None = None) -> str:
    """``text`` with every secret option value of the location (and of the environment) replaced by ``***``."""
    values = {v for k, v in settings.env_subset([*S3_ENV, *AZURE_ENV, *GCS_ENV]).items() if is_secret_option(k)}
    if where is not None:
        try:
            values |= {v for k, v in options(where).items() if is_secret_option(k)}
        except MvSinkError:  # an unset reference: its value is nowhere to leak
            pass
    for v in sorted((v for v in values if len(v) >= 4), key=len, reverse=True):
        text = text.replace(v, "***")
    return text


def store_endpoint(where: Where) -> str:
    """The endpoint a location's requests go to, for messages."""
    loc = parse(where)
    opts = options(loc)
    if loc.kind == "s3":
        return opts.get("AWS_ENDPOINT_URL") or f"AWS S3 ({opts.get('AWS_REGION') or 'default region'})"
    if loc.kind == "azure":
        if truthy(opts.get("AZURE_STORAGE_USE_EMULATOR")):
            return emulator_url(loc)
        return f"https://{opts.get('AZURE_STORAGE_ACCOUNT_NAME') or loc.account}.blob.core.windows.net"
    return loc.kind


def bad_input_error(where: Where, what: str, text: str) -> MvSinkError | None:
    """The error to raise when the store's answer ``text`` (an exception's message, a status) means the user's
    input is wrong: a bucket or container that does not exist, or credentials the store refuses. None otherwise."""
    loc = parse(where)
    low = text.lower()
    flat = low.replace("_", "").replace(" ", "")  # pyarrow writes SIGNATURE_DOES_NOT_MATCH, S3 SignatureDoesNotMatch
    if any(w in low or w.replace(" ", "") in flat for w in _NO_BUCKET):
        return missing_bucket(loc)
    if any(w in low or w.replace(" ", "") in flat for w in _DENIED):
        return access_denied(loc, what)
    return None


def missing_bucket(where: Where) -> MissingBucketError:
    loc = parse(where)
    noun = "container" if loc.kind == "azure" else "bucket"
    return MissingBucketError(
        f"location {loc.uri}: the {noun} {loc.bucket} does not exist on {store_endpoint(loc)}. Fix: create the "
        f"{noun}, or correct the location in the view file (or the store's endpoint)."
    )


def access_denied(where: Where, what: str) -> StoreAccessError:
    loc = parse(where)
    names = [n for n in CREDENTIAL_OPTIONS.get(loc.kind, ()) if n in options(loc)] or list(
        CREDENTIAL_OPTIONS.get(loc.kind, ())[:2]
    )
    fix = ", ".join(loc.origin(n) for n in names)
    return StoreAccessError(
        f"location {loc.uri}: the store at {store_endpoint(loc)} refused the credentials ({what}). Fix: correct "
        f"{fix} (the store did not accept them for this {'container' if loc.kind == 'azure' else 'bucket'})."
    )


def store_error(where: Where, what: str, exc: BaseException) -> MvSinkError | StoreError:
    """The error for a failed request to the store: bad input (:func:`bad_input_error`) or a
    :class:`StoreError` a retry may fix; secrets scrubbed from the message either way."""
    text = f"{type(exc).__name__}: {exc}"
    bad = bad_input_error(where, what, text)
    if bad is not None:
        return bad
    return StoreError(
        f"location {uri_of(where)}: {what} failed: {scrub(text, where)}. Fix: check the store is reachable and "
        "the credentials allow it, then retry."
    )


_checked: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()


def check_container(where: Where) -> None:
    """Fail with a bad-input error if the bucket or container of ``where`` is missing or refuses the
    credentials. A listing does not tell a missing bucket from an empty folder, so an empty listing asks
    once per bucket and process (a success is cached)."""
    loc = parse(where)
    if loc.is_local:
        return
    cache_key = (loc.kind, loc.container_uri(), _options_key(loc))
    if cache_key in _checked:
        return
    if loc.kind in ("s3", "azure"):
        from mvsink.core import storehttp

        target = storehttp.Target(bucket=loc.bucket, account=loc.account, emulator_url=emulator_url(loc))
        status, body = storehttp.container_status(delta_options(loc) or {}, target, kind=loc.kind)
        if status == 404 or any(w in body.lower() for w in _NO_BUCKET):
            raise missing_bucket(loc)
        if status in (401, 403):
            raise access_denied(loc, f"HTTP {status} on the {'container' if loc.kind == 'azure' else 'bucket'}")
    _checked.add(cache_key)


# ---------------------------------------------------------------- pyarrow filesystems

_fs_cache: dict[tuple[str, str, tuple[tuple[str, str], ...]], Any] = {}


def filesystem(where: Where) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem for a location and the path of it within that filesystem."""
    loc = parse(where)
    if loc.is_local:
        import pyarrow.fs as pafs

        return pafs.LocalFileSystem(), loc.key
    opts = delta_options(loc) or {}
    cache_key = (loc.kind, loc.container_uri() if loc.kind == "azure" else "", _options_key(loc))
    fs = _fs_cache.get(cache_key)
    if fs is None:
        fs = _make_fs(loc, opts)
        _fs_cache[cache_key] = fs
    if loc.kind == "azure":  # rooted at the container
        return fs, loc.key
    return fs, posixpath.join(loc.bucket, loc.key) if loc.key else loc.bucket


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
        if truthy(opts.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST")):
            kw["force_virtual_addressing"] = True
        return pafs.S3FileSystem(**kw)
    if loc.kind == "azure":
        # pyarrow's AzureFileSystem does not sign requests the emulator accepts; delta-rs's own object
        # store (the one every commit goes through) does, with the same options: wrap it as a pyarrow
        # filesystem rooted at the container.
        from deltalake.fs import DeltaStorageHandler

        return pafs.PyFileSystem(DeltaStorageHandler(loc.container_uri(), opts))
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


def _io(where: Where, what: str, exc: Exception) -> MvSinkError | StoreError:
    return store_error(where, what, exc)


_NOT_FOUND = ("not found", "not_found", "nosuchkey", "no such key", "does not exist", "blobnotfound", "404")


def _not_found(exc: OSError) -> bool:
    """The error says the object is not there (each store and client words it its own way)."""
    if isinstance(exc, FileNotFoundError):
        return True
    text = str(exc).lower()
    if any(w in text for w in _NO_BUCKET):
        return False
    return any(w in text for w in _NOT_FOUND)


def list_dir(where: Where) -> list[Entry]:
    """The entries directly under a location (empty if it does not exist; an error if its bucket does not)."""
    loc = parse(where)
    if loc.is_local:  # without pyarrow: a refresh with nothing to write imports none (issue 35)
        return _list_local(where, loc.key)
    import pyarrow.fs as pafs

    fs, path = filesystem(loc)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=False))
    except FileNotFoundError:
        infos = []
    except OSError as exc:
        raise _io(where, "listing", exc) from exc
    if not infos:
        check_container(where)
    out = []
    for i in infos:
        mtime = i.mtime_ns // 1_000_000 if i.mtime_ns is not None else 0
        out.append(Entry(i.base_name, i.type == pafs.FileType.Directory, int(i.size or 0), int(mtime)))
    return out


def _list_local(where: Where, path: str) -> list[Entry]:
    """:func:`list_dir` of a local folder, as pyarrow's local filesystem lists it (a folder's size 0; a link's
    target's size and time)."""
    import os

    out = []
    try:
        with os.scandir(path) as it:
            for e in it:
                try:
                    st = e.stat()
                except FileNotFoundError:  # a dangling link, or removed while listed
                    continue
                is_dir = e.is_dir()
                out.append(Entry(e.name, is_dir, 0 if is_dir else st.st_size, st.st_mtime_ns // 1_000_000))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise _io(where, "listing", exc) from exc
    return out


def list_files(where: Where) -> list[tuple[str, int]]:
    """Every file under a location recursively: (path relative to it, last-modified ms)."""
    import pyarrow.fs as pafs

    fs, path = filesystem(where)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=True))
    except FileNotFoundError:
        infos = []
    except OSError as exc:
        raise _io(where, "listing", exc) from exc
    if not infos:
        check_container(where)
    base = path.rstrip("/") + "/"
    return [
        (i.path[len(base) :] if i.path.startswith(base) else i.base_name, (i.mtime_ns or 0) // 1_000_000)
        for i in infos
        if i.type == pafs.FileType.File
    ]


def info(where: Where) -> Entry | None:
    """The file or folder at a location, None if there is none."""
    import pyarrow.fs as pafs

    fs, path = filesystem(where)
    try:
        i = fs.get_file_info(path)
    except OSError as exc:
        raise _io(where, "reading file info", exc) from exc
    if i.type == pafs.FileType.NotFound:
        check_container(where)
        return None
    mtime = i.mtime_ns // 1_000_000 if i.mtime_ns is not None else 0
    return Entry(i.base_name, i.type == pafs.FileType.Directory, int(i.size or 0), int(mtime))


def exists(where: Where) -> bool:
    return info(where) is not None


# Words of a failed request that a repeat of the same read may not meet: a dropped or reset connection,
# a response stream the client could not read to its end, the store asking to slow down. Reads are
# idempotent, so they are repeated a few times before the error is raised; writes are not repeated here.
_TRANSIENT = (
    "internal_failure",
    "failed to flush response stream",
    "network_connection",
    "connection reset",
    "connection refused",
    "broken pipe",
    "timed out",
    "slowdown",
    "slow_down",
    "service unavailable",
    "503",
)
READ_ATTEMPTS = 4


def transient(exc: BaseException) -> bool:
    """The failed request may succeed if made again (see ``_TRANSIENT``)."""
    text = str(exc).lower()
    return any(w in text for w in _TRANSIENT)


def _read_once(fs: Any, path: str) -> bytes:
    with fs.open_input_stream(path) as f:
        return bytes(f.read())


def read_bytes(where: Where) -> bytes | None:
    """The file's content, None if it does not exist. A transient failure is retried
    (:data:`READ_ATTEMPTS` in all, 50 ms doubling between them)."""
    import time

    loc = parse(where)
    if loc.is_local:  # (no pyarrow import for a local file: a refresh without Spark reads its plan facts so)
        try:
            with open(loc.key, "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise _io(where, "reading", exc) from exc
    fs, path = filesystem(where)
    for attempt in range(1, READ_ATTEMPTS + 1):
        try:
            return _read_once(fs, path)
        except OSError as exc:
            if _not_found(exc):  # also when it went away between a listing and this read
                check_container(where)
                return None
            if attempt < READ_ATTEMPTS and transient(exc):
                log.info(
                    "location %s: reading failed (%s), attempt %d of %d",
                    uri_of(where),
                    scrub(f"{type(exc).__name__}: {exc}", where),
                    attempt,
                    READ_ATTEMPTS,
                )
                time.sleep(0.05 * 2 ** (attempt - 1))
                continue
            raise _io(where, "reading", exc) from exc
    raise AssertionError("unreachable")


def read_text(where: Where) -> str | None:
    data = read_bytes(where)
    return None if data is None else data.decode()


def write_text(where: Where, text: str) -> None:
    """Write ``text`` to a location so that readers see the old content or the new, never a partial file.

    Local: a temporary file renamed over it. Object stores: one PUT (atomic there).
    """
    import os

    loc = parse(where)
    if loc.is_local:
        path = loc.key
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        return
    write_bytes(loc, text.encode())


def write_bytes(where: Where, data: bytes) -> None:
    """Write ``data`` to a location in one request (object stores; local paths: a plain write)."""
    import pyarrow.fs as pafs

    loc = parse(where)
    fs, path = filesystem(loc)
    try:
        if isinstance(fs, pafs.PyFileSystem):
            # delta-rs's handler stream takes bytes, not the Buffer pyarrow's wrapper passes it
            raw = fs.handler._handler.open_output_stream(path, None)
            raw.write(data)
            raw.close()
        else:
            if loc.is_local:
                fs.create_dir(posixpath.dirname(path), recursive=True)
            with fs.open_output_stream(path) as f:
                f.write(data)
    except OSError as exc:
        raise _io(loc, "writing", exc) from exc


def delete_file(where: Where) -> None:
    """Delete one file (nothing if it does not exist)."""
    loc = parse(where)
    if loc.is_local:
        import os

        try:
            os.remove(loc.key)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _io(loc, "deleting", exc) from exc
        return
    fs, path = filesystem(loc)
    try:
        fs.delete_file(path)
    except OSError as exc:
        if _not_found(exc):
            return
        raise _io(where, "deleting", exc) from exc


def delete_dir(where: Where) -> None:
    """Delete a folder and everything under it (nothing if it does not exist)."""
    import shutil

    loc = parse(where)
    if loc.is_local:
        shutil.rmtree(loc.key, ignore_errors=True)
        return
    fs, path = filesystem(loc)
    try:
        fs.delete_dir(path)
    except OSError as exc:
        if _not_found(exc):
            return
        raise _io(loc, "deleting", exc) from exc
