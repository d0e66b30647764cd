"""Locations: where a table lives (local disk or object storage) and how each engine reaches it.

A location is parsed once (:func:`parse`, the one URI parser here) into a frozen :class:`Location`: kind,
bucket or container, path, and the options that reach it (the standard variables ``AWS_*``,
``AZURE_STORAGE_*``, ``GOOGLE_*``, overridden by a view's ``storage_options``: :func:`view_locations`).
Every function below takes a :class:`Location` or a plain URI (options from the environment), and derives:

- :func:`delta_options`: delta-rs ``storage_options`` (every Delta log read and commit);
- :func:`filesystem`: a pyarrow filesystem and the path within it, for everything mvsink reads or
  writes outside Spark; the file helpers (:func:`read_text`, :func:`write_text`, :func:`list_dir`, ...) use it;
- :func:`spark_uri` and :func:`spark_hadoop_conf`: Spark's view of the same place (``s3a://``, ``abfs[s]://``)
  with the credentials passed explicitly (secret settings: see :func:`mvsink.spark.conf.split_secret_conf`);
- :func:`store_error`, :func:`check_container`: a store's refusal as bad input (missing bucket, refused
  credentials, naming the variable or option to fix), secrets scrubbed from every message.

The probe that refuses a store whose put-if-absent does not hold is :mod:`mvsink.core.probe`.
Local paths behave exactly as before: the helpers then use the local filesystem.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, overload
from urllib.parse import urlsplit

from mvsink import settings
from mvsink.exceptions import MissingBucketError, MvSinkError, StoreAccessError, StoreError

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


#: Option names whose values are secrets: never logged, never in a message, never on a command line.
SECRET_OPTIONS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "SAS", "CREDENTIAL", "SIGNATURE")


def is_secret_option(name: str) -> bool:
    """True for a store option whose value is a secret (an access key, a token, ...); not the key's id."""
    up = name.upper()
    return up != "AWS_ACCESS_KEY_ID" and any(w in up for w in SECRET_OPTIONS)


@dataclasses.dataclass(frozen=True)
class Location:
    """One place a table lives, parsed once, with the options that reach it.

    ``kind`` is ``local``, ``s3``, ``azure`` or ``gcs``. ``options`` are the store settings in delta-rs's
    names (the standard variables, overridden by a view's ``storage_options``); ``from_view`` names the
    options the view file set (an error then names the option to fix, not the variable). The options are
    left out of ``repr``: a Location may be logged.
    """

    uri: str  # as delta-rs takes it: an absolute local path, or scheme://bucket/key (s3a:// read as s3://)
    kind: str
    scheme: str  # the URI's scheme ("" for a local path)
    bucket: str  # bucket or container ("" for a local path)
    key: str  # the path inside the bucket (no leading slash); the absolute path for a local location
    account: str = ""  # Azure: the account named in an abfs[s]:// URI (container@account.dfs...)
    options: tuple[tuple[str, str], ...] = dataclasses.field(default=(), repr=False)
    from_view: frozenset[str] = dataclasses.field(default=frozenset(), repr=False)

    def __str__(self) -> str:
        return self.uri

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    @property
    def opts(self) -> dict[str, str]:
        """The options as a dict (a copy)."""
        return dict(self.options)

    def join(self, *parts: str) -> Location:
        """The location ``parts`` below this one, with the same options."""
        if self.is_local:
            import os

            path = os.path.join(self.key, *parts)
            return dataclasses.replace(self, uri=path, key=path)
        key = posixpath.join(self.key, *(p.strip("/") for p in parts)).strip("/")
        uri = posixpath.join(self.uri.rstrip("/"), *(p.strip("/") for p in parts))
        return dataclasses.replace(self, uri=uri, key=key)

    def container(self) -> Location:
        """The bucket or container that holds this location."""
        return dataclasses.replace(self, uri=container_uri(self), key="")

    def origin(self, option: str) -> str:
        """Where ``option`` comes from, for a message: the view file's option or the environment variable."""
        return f"storage_options.{option} in the view file" if option in self.from_view else option


#: A location given either way: a URI or path (options from the environment), or a parsed :class:`Location`.
Where = str | Location


def is_uri(value: Where) -> bool:
    """True if ``value`` names a location by URI (``scheme://...``), not a local path."""
    if isinstance(value, Location):
        return not value.is_local
    scheme = urlsplit(value).scheme
    return len(scheme) > 1 and "://" in value


def parse(uri: Where, options: Mapping[str, str] | None = None) -> Location:
    """The location ``uri`` names, with its options: the standard variables of its kind of store, overridden
    by ``options`` (e.g. a view's resolved ``storage_options``); a clear error for a scheme mvsink cannot reach.

    This is the one URI parser: every other function takes what it returns (or parses through it).
    """
    if isinstance(uri, Location):
        return uri if options is None else _with_options(uri, options)
    if not is_uri(uri):
        return Location(uri=uri, kind="local", scheme="", bucket="", key=uri)
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme == "file":
        path = parts.path or "/"
        return Location(uri=path, kind="local", scheme="", bucket="", key=path)
    key = parts.path.strip("/")
    if scheme in S3_SCHEMES:
        loc = Location(uri=_join_uri("s3", parts.netloc, key), kind="s3", scheme="s3", bucket=parts.netloc, key=key)
    elif scheme in AZURE_SCHEMES:
        container, _, host = parts.netloc.partition("@")
        account = host.split(".", 1)[0] if host else ""
        loc = Location(uri=uri.rstrip("/"), kind="azure", scheme=scheme, bucket=container, key=key, account=account)
    elif scheme in GCS_SCHEMES:
        loc = Location(uri=_join_uri("gs", parts.netloc, key), kind="gcs", scheme="gs", bucket=parts.netloc, key=key)
    else:
        raise StoreError(
            f"location {uri}: scheme {scheme}:// is not supported. Fix: use a local path, file://, s3://, s3a://, "
            "az://, abfs[s]:// or gs://."
        )
    return _with_options(loc, options or {})


def _with_options(loc: Location, options: Mapping[str, str]) -> Location:
    if loc.is_local:
        return loc
    names = {"s3": S3_ENV, "azure": AZURE_ENV, "gcs": GCS_ENV}.get(loc.kind, ())
    opts = settings.env_subset(names)
    if loc.kind == "azure":
        opts.update(settings.env_subset(["AZURITE_BLOB_STORAGE_URL"]))
    given = {k.upper(): str(v) for k, v in options.items()}
    opts.update(given)
    return dataclasses.replace(loc, options=tuple(sorted(_normalise(loc, opts).items())), from_view=frozenset(given))


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
    if loc.kind == "azure" and _truthy(opts.get("AZURE_STORAGE_USE_EMULATOR")):
        opts.setdefault("AZURE_STORAGE_ACCOUNT_NAME", AZURITE_ACCOUNT)
        opts.setdefault("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY)
    return opts


def _join_uri(scheme: str, bucket: str, key: str) -> str:
    return f"{scheme}://{bucket}/{key}" if key else f"{scheme}://{bucket}"


def normalize(uri: Where) -> str:
    """The canonical form of a location (``s3a://`` as ``s3://``, ``file://`` as a path, no trailing slash)."""
    return parse(uri).uri


def uri_of(where: Where) -> str:
    """The URI (or local path) of a location given either way."""
    return where.uri if isinstance(where, Location) else where


@overload
def join(base: Location, *parts: str) -> Location: ...
@overload
def join(base: str, *parts: str) -> str: ...
def join(base: Where, *parts: str) -> Where:
    """``base`` with ``parts`` appended, of ``base``'s type: a :class:`Location` keeps its options
    (``/``-separated for URIs; ``os.path`` rules for local paths)."""
    import os

    if isinstance(base, Location):
        return base.join(*parts)
    if not is_uri(base):
        return os.path.join(base, *parts)
    return posixpath.join(base.rstrip("/"), *(p.strip("/") for p in parts))


# ---------------------------------------------------------------- a view's locations


def view_locations(view: ViewDefinition) -> dict[str, Location]:
    """The view's target and path sources as :class:`Location` values (keyed by the URI the view file
    gives), each parsed once with the view's ``storage_options`` (references read from the environment)."""
    opts = view.resolved_storage_options() if view.storage_options else {}
    out: dict[str, Location] = {}
    for uri in (view.target, *(s.path for s in view.sources if s.path)):
        if uri not in out:
            out[uri] = parse(uri, opts)
    return out


# Transitional: modules that still pass a view's locations as plain URIs (the table and Delta log readers)
# find the view's options here. register_view is called where a view's table is opened; new code passes
# the Location from view_locations instead.
_known: dict[str, Location] = {}
_lock = threading.Lock()


def register_view(view: ViewDefinition) -> None:
    """Make the view's locations (with its ``storage_options``) known to callers that pass plain URIs."""
    if not view.storage_options:
        return
    with _lock:
        for loc in view_locations(view).values():
            if not loc.is_local:
                _known[loc.uri.rstrip("/")] = loc


def location(where: Where) -> Location:
    """``where`` as a :class:`Location`: as given, or parsed (with a registered view's options if it lies
    under one of that view's locations)."""
    if isinstance(where, Location):
        return where
    loc = parse(where)
    if loc.is_local or not _known:
        return loc
    best: Location | None = None
    with _lock:
        for prefix, known in _known.items():
            if (loc.uri == prefix or loc.uri.startswith(prefix + "/")) and (
                best is None or len(prefix) > len(best.uri)
            ):
                best = known
    if best is None:
        return loc
    return dataclasses.replace(loc, options=best.options, from_view=best.from_view)


def emulator_url(where: Where | None = None) -> str:
    """The Azure storage emulator's blob endpoint (``AZURITE_BLOB_STORAGE_URL``, as delta-rs reads it)."""
    if where is not None:
        url = location(where).opts.get("AZURITE_BLOB_STORAGE_URL")
        if url:
            return url
    return settings.env_subset(["AZURITE_BLOB_STORAGE_URL"]).get("AZURITE_BLOB_STORAGE_URL") or "http://127.0.0.1:10000"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def delta_options(where: Where) -> dict[str, str] | None:
    """delta-rs ``storage_options`` for a location: None for a local path (delta-rs needs none)."""
    loc = location(where)
    if loc.is_local:
        return None
    opts = loc.opts
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
        values |= {v for k, v in location(where).options if is_secret_option(k)}
    for v in sorted((v for v in values if len(v) >= 4), key=len, reverse=True):
        text = text.replace(v, "***")
    return text


def store_endpoint(where: Where) -> str:
    """The endpoint a location's requests go to, for messages."""
    loc = location(where)
    opts = loc.opts
    if loc.kind == "s3":
        return opts.get("AWS_ENDPOINT_URL") or f"AWS S3 ({opts.get('AWS_REGION') or 'default region'})"
    if loc.kind == "azure":
        if _truthy(opts.get("AZURE_STORAGE_USE_EMULATOR")):
            return emulator_url(loc)
        return f"https://{opts.get('AZURE_STORAGE_ACCOUNT_NAME') or loc.account}.blob.core.windows.net"
    return loc.kind


def bad_input_error(where: Where, what: str, text: str) -> MvSinkError | None:
    """The error to raise when the store's answer ``text`` (an exception's message, a status) means the user's
    input is wrong: a bucket or container that does not exist, or credentials the store refuses. None otherwise."""
    loc = location(where)
    low = text.lower()
    flat = low.replace("_", "").replace(" ", "")  # pyarrow writes SIGNATURE_DOES_NOT_MATCH, S3 SignatureDoesNotMatch
    if any(w in low or w.replace(" ", "") in flat for w in _NO_BUCKET):
        return missing_bucket(loc)
    if any(w in low or w.replace(" ", "") in flat for w in _DENIED):
        return access_denied(loc, what)
    return None


def missing_bucket(where: Where) -> MissingBucketError:
    loc = location(where)
    noun = "container" if loc.kind == "azure" else "bucket"
    return MissingBucketError(
        f"location {loc.uri}: the {noun} {loc.bucket} does not exist on {store_endpoint(loc)}. Fix: create the "
        f"{noun}, or correct the location in the view file (or the store's endpoint)."
    )


def access_denied(where: Where, what: str) -> StoreAccessError:
    loc = location(where)
    names = [n for n in CREDENTIAL_OPTIONS.get(loc.kind, ()) if n in loc.opts] or list(
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
    loc = location(where)
    if loc.is_local:
        return
    cache_key = (loc.kind, container_uri(loc), loc.options)
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
    loc = location(where)
    if loc.is_local:
        import pyarrow.fs as pafs

        return pafs.LocalFileSystem(), loc.key
    opts = delta_options(loc) or {}
    cache_key = (loc.kind, container_uri(loc) if loc.kind == "azure" else "", loc.options)
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
    import pyarrow.fs as pafs

    fs, path = filesystem(where)
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

    loc = location(where)
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

    loc = location(where)
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
    fs, path = filesystem(where)
    try:
        fs.delete_file(path)
    except OSError as exc:
        if _not_found(exc):
            return
        raise _io(where, "deleting", exc) from exc


def delete_dir(where: Where) -> None:
    """Delete a folder and everything under it (nothing if it does not exist)."""
    import shutil

    loc = location(where)
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


# ---------------------------------------------------------------- Spark's view of a location

#: Azure's DFS host suffix: Spark's ABFS driver names an account by it.
DFS_SUFFIX = "dfs.core.windows.net"


def _azure_account(loc: Location) -> str:
    account = (loc.opts.get("AZURE_STORAGE_ACCOUNT_NAME") or loc.account or "").strip()
    if not account:
        raise StoreError(
            f"location {loc.uri}: Spark reads Azure through abfss://container@account.{DFS_SUFFIX}/..., "
            "and no account is known. Fix: set AZURE_STORAGE_ACCOUNT_NAME, or write the location as abfss://."
        )
    return account


def _emulated(loc: Location) -> bool:
    return loc.kind == "azure" and _truthy(loc.opts.get("AZURE_STORAGE_USE_EMULATOR"))


def spark_uri(where: Where) -> str:
    """The URI Spark (Hadoop) reads a location by: ``s3://`` is ``s3a://``; Azure is
    ``abfss://container@account.dfs.core.windows.net/...`` (``abfs://``, plain http, on the emulator);
    local paths and ``gs://`` stay as they are."""
    loc = location(where)
    if loc.kind == "s3":
        return _join_uri("s3a", loc.bucket, loc.key)
    if loc.kind == "azure":
        account = _azure_account(loc)
        scheme = "abfs" if _emulated(loc) else ("abfs" if loc.scheme == "abfs" else "abfss")
        host = f"{loc.bucket}@{account}.{DFS_SUFFIX}"
        return f"{scheme}://{host}/{loc.key}" if loc.key else f"{scheme}://{host}"
    return loc.uri


def spark_hadoop_conf(where: Where) -> dict[str, str]:
    """Hadoop settings (``spark.hadoop.*``) for Spark to reach a location, credentials included: scoped to the
    location's bucket (``fs.s3a.bucket.<bucket>.*``) or account (``fs.azure.*.<account>.dfs.core.windows.net``),
    so views on different stores can share one session.

    Secret values are in it: pass it only through :func:`mvsink.spark.conf.split_secret_conf` (a 0600
    properties file for spark-submit) or a session's runtime settings, never onto a command line or a log.
    """
    loc = location(where)
    opts = delta_options(loc) or {}
    if loc.kind == "s3":
        b = f"spark.hadoop.fs.s3a.bucket.{loc.bucket}."
        conf = {"spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
        if "AWS_ACCESS_KEY_ID" in opts:
            conf[b + "access.key"] = opts["AWS_ACCESS_KEY_ID"]
            conf[b + "secret.key"] = opts.get("AWS_SECRET_ACCESS_KEY", "")
            if opts.get("AWS_SESSION_TOKEN"):
                conf[b + "session.token"] = opts["AWS_SESSION_TOKEN"]
                conf[b + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
            else:
                conf[b + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        endpoint = opts.get("AWS_ENDPOINT_URL")
        if endpoint:
            conf[b + "endpoint"] = endpoint
            conf[b + "path.style.access"] = str(not _truthy(opts.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST"))).lower()
            conf[b + "connection.ssl.enabled"] = str(not endpoint.startswith("http://")).lower()
        if "AWS_REGION" in opts:
            conf[b + "endpoint.region"] = opts["AWS_REGION"]
        return conf
    if loc.kind == "azure":
        account = _azure_account(loc)
        host = f"{account}.{DFS_SUFFIX}"
        conf = {
            "spark.hadoop.fs.abfs.impl": "org.apache.hadoop.fs.azurebfs.AzureBlobFileSystem",
            "spark.hadoop.fs.abfss.impl": "org.apache.hadoop.fs.azurebfs.SecureAzureBlobFileSystem",
        }
        if opts.get("AZURE_STORAGE_ACCOUNT_KEY"):
            conf[f"spark.hadoop.fs.azure.account.auth.type.{host}"] = "SharedKey"
            conf[f"spark.hadoop.fs.azure.account.key.{host}"] = opts["AZURE_STORAGE_ACCOUNT_KEY"]
        if _emulated(loc):
            # Azurite serves the Blob API only, path-style, over http: ABFS's Blob endpoint support
            # (a non-hierarchical account) with the emulator's address in place of the account's host
            netloc = urlsplit(emulator_url(loc)).netloc
            conf[f"spark.hadoop.fs.azure.abfs.endpoint.{host}"] = netloc
            # read globally only (an account-specific key is ignored): plain http for abfs:// (abfss:// stays TLS)
            conf["spark.hadoop.fs.azure.always.use.https"] = "false"
            # ABFS's default Apache client has no TLS socket factory unless https was used first in the JVM
            conf[f"spark.hadoop.fs.azure.networking.library.{host}"] = "JDK_HTTP_URL_CONNECTION"
            conf[f"spark.hadoop.fs.azure.account.hns.enabled.{host}"] = "false"
            conf[f"spark.hadoop.fs.azure.fns.account.service.type.{host}"] = "BLOB"
        return conf
    if loc.kind == "gcs":
        return {"spark.hadoop.fs.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem"}
    return {}
