"""A location: where a table lives (local disk or object storage), parsed once into a value.

:func:`parse` is the one URI parser of mvsink: the view file (``definitions``), the storage layer
(``core/storage.py``), the settings (``MVSINK_ALLOWED_LOCATIONS``), the engines and the Airflow lineage all
take what it returns, or ask :func:`is_uri`. A :class:`Location` is frozen and carries, besides the parts of
the URI, the view file's ``storage_options`` as written (an inline value, or a reference ``{env: VARIABLE}``):
never a secret value, so a Location may be logged and put in a batch description's JSON
(:meth:`Location.to_json`). The options are resolved (the environment read) only where a store is reached:
:func:`mvsink.core.storage.options`.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
from collections.abc import Mapping
from typing import Any, overload
from urllib.parse import urlsplit

from mvsink.exceptions import StoreError

S3_SCHEMES = ("s3", "s3a")
AZURE_SCHEMES = ("az", "abfs", "abfss", "adl", "azure")
GCS_SCHEMES = ("gs", "gcs")
#: Every scheme a location may have besides ``file://`` (a local path).
SCHEMES = (*S3_SCHEMES, *AZURE_SCHEMES, *GCS_SCHEMES)

#: Option names whose values are secrets: never logged, never in a message, never on a command line.
SECRET_OPTIONS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "SAS", "CREDENTIAL", "SIGNATURE")

#: How a view file gives a store option: ``value`` (the text, never a secret) or ``env`` (a variable's name).
OptionSpec = tuple[str, str, str]  # (OPTION, "value" | "env", text or VARIABLE)


def is_secret_option(name: str) -> bool:
    """True for a store option whose value is a secret (an access key, a token, ...); not the key's id."""
    up = name.upper()
    return up != "AWS_ACCESS_KEY_ID" and any(w in up for w in SECRET_OPTIONS)


@dataclasses.dataclass(frozen=True)
class Location:
    """One place a table lives, parsed once, with the store options the view file gives for it.

    ``kind`` is ``local``, ``s3``, ``azure`` or ``gcs``. ``storage_options`` are the view file's settings as
    written, in delta-rs's names: ``(OPTION, "value", text)`` or ``(OPTION, "env", VARIABLE)``, never a
    secret value (a view file gives a secret only by reference); the standard variables fill in the rest
    when the store is reached. ``view`` names the view whose file gave them (for a message). Options are
    left out of ``repr``.
    """

    uri: str  # as delta-rs takes it: an absolute local path, or scheme://bucket/key (s3a:// read as s3://)
    kind: str
    scheme: str  # the URI's scheme ("" for a local path)
    bucket: str  # bucket or container ("" for a local path)
    key: str  # the path inside the bucket (no leading slash); the path itself for a local location
    account: str = ""  # Azure: the account named in an abfs[s]:// URI (container@account.dfs...)
    storage_options: tuple[OptionSpec, ...] = dataclasses.field(default=(), repr=False)
    view: str = dataclasses.field(default="", repr=False, compare=False)

    def __str__(self) -> str:
        return self.uri

    def __fspath__(self) -> str:
        return self.uri

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    @property
    def from_view(self) -> frozenset[str]:
        """The options the view file sets (an error then names the option to fix, not the variable)."""
        return frozenset(name for name, _, _ in self.storage_options)

    def joinpath(self, *parts: str) -> Location:
        """The location ``parts`` below this one, with the same options."""
        if self.is_local:
            path = os.path.join(self.key, *parts)
            return dataclasses.replace(self, uri=path, key=path)
        key = posixpath.join(self.key, *(p.strip("/") for p in parts)).strip("/")
        uri = posixpath.join(self.uri.rstrip("/"), *(p.strip("/") for p in parts))
        return dataclasses.replace(self, uri=uri, key=key)

    def file(self, path: str) -> Location:
        """The file a table at this location names by ``path`` (in its log, a listing, a manifest): relative
        to it (below it, with its options), or absolute (``file://`` as a local path; with this location's
        options if it lies at or below it, else the environment's only)."""
        if not is_uri(path) and not path.startswith("/"):
            return self.joinpath(path)
        loc = parse(path)
        root = self.key.rstrip("/")
        below = not root or loc.key == root or loc.key.startswith(root + "/")
        other_account = bool(loc.account and self.account and loc.account != self.account)
        if (loc.kind, loc.bucket) != (self.kind, self.bucket) or other_account or not below:  # (any scheme spelling)
            return loc
        return dataclasses.replace(loc, storage_options=self.storage_options, view=self.view)

    def container_uri(self) -> str:
        """The URI of the bucket or container that holds this location."""
        if self.kind == "azure":
            parts = urlsplit(self.uri)
            return f"{parts.scheme}://{parts.netloc}"
        return _join_uri(self.scheme, self.bucket, "")

    def container(self) -> Location:
        """The bucket or container that holds this location."""
        return dataclasses.replace(self, uri=self.container_uri(), key="")

    def under(self, prefix: Location) -> bool:
        """This location is ``prefix`` or below it (whole path segments)."""
        p = prefix.uri.rstrip("/")
        return self.uri == p or self.uri.startswith(p + "/")

    def origin(self, option: str) -> str:
        """Where ``option`` comes from, for a message: the view file's option or the environment variable."""
        return f"storage_options.{option} in the view file" if option in self.from_view else option

    def to_json(self) -> str | dict[str, Any]:
        """The location for a JSON document (a batch description): its URI, or with the view file's options
        ``{"uri", "storage_options", "view"}``. No secret value is in it: references stay references (an
        option given inline to :func:`parse` under a secret's name is left out: the receiving process reads
        the standard variable instead)."""
        specs = [s for s in self.storage_options if not (s[1] == "value" and is_secret_option(s[0]))]
        if not specs:
            return self.uri
        return {"uri": self.uri, "storage_options": {n: [k, v] for n, k, v in specs}, "view": self.view}

    @classmethod
    def from_json(cls, value: object) -> Location:
        """The location :meth:`to_json` wrote (a URI or path: options from the environment only)."""
        if isinstance(value, Location):
            return value
        if isinstance(value, str):
            return parse(value)
        if isinstance(value, dict) and isinstance(value.get("uri"), str):
            raw = value.get("storage_options") or {}
            ok = isinstance(raw, dict) and all(
                isinstance(s, list) and len(s) == 2 and s[0] in ("value", "env") and isinstance(s[1], str)
                for s in raw.values()
            )
            if ok and isinstance(value.get("view", ""), str):
                specs = tuple(sorted((str(n), s[0], s[1]) for n, s in raw.items()))
                return parse(value["uri"], storage_options=specs, view=value.get("view", ""))
        raise ValueError(
            f"batch description: location {value!r} is not a URI or path. Fix: pass the description mint "
            "produced, unchanged."
        )


#: A location given either way: a URI or path (options from the environment), or a parsed :class:`Location`.
Where = str | Location


def is_uri(value: Where) -> bool:
    """True if ``value`` names a location by URI (``scheme://...``, ``file://`` included), not a plain path."""
    if isinstance(value, Location):
        return not value.is_local
    scheme = urlsplit(value).scheme
    return len(scheme) > 1 and "://" in value


def scheme_of(value: str) -> str:
    """The lower-case scheme of a URI (``""`` for a plain path)."""
    return urlsplit(value).scheme.lower() if is_uri(value) else ""


def parse(
    uri: Where,
    options: Mapping[str, str] | None = None,
    *,
    storage_options: tuple[OptionSpec, ...] | None = None,
    view: str = "",
) -> Location:
    """The location ``uri`` names; a clear error for a scheme mvsink cannot reach.

    ``storage_options`` are a view file's options as written (:data:`OptionSpec`); ``options`` are options
    given by value (``{"AWS_REGION": "eu-west-1"}``), kept as ``value`` specs. A local location takes none.
    """
    if isinstance(uri, Location):
        loc = uri
    elif not is_uri(uri):
        loc = Location(uri=uri, kind="local", scheme="", bucket="", key=uri)
    else:
        loc = _parse_uri(uri)
    if options is None and storage_options is None:
        return loc
    if loc.is_local:
        return dataclasses.replace(loc, storage_options=(), view=view or loc.view)
    specs = dict(((n, (k, v)) for n, k, v in storage_options or ()))
    specs.update({str(k).upper(): ("value", str(v)) for k, v in (options or {}).items()})
    spec = tuple(sorted((n, k, v) for n, (k, v) in specs.items()))
    return dataclasses.replace(loc, storage_options=spec, view=view or loc.view)


def _parse_uri(uri: str) -> Location:
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


def normalize(uri: Where) -> str:
    """The canonical form of a location (``s3a://`` as ``s3://``, ``file://`` as a path, no trailing slash)."""
    return parse(uri).uri


def uri_of(where: Where) -> str:
    """The URI (or local path) of a location given either way."""
    return where.uri if isinstance(where, Location) else where


@overload
def joinpath(base: Location, *parts: str) -> Location: ...
@overload
def joinpath(base: str, *parts: str) -> str: ...
def joinpath(base: Where, *parts: str) -> Where:
    """``base`` with ``parts`` appended, of ``base``'s type: a :class:`Location` keeps its options
    (``/``-separated for URIs; ``os.path`` rules for local paths)."""
    if isinstance(base, Location):
        return base.joinpath(*parts)
    if not is_uri(base):
        return os.path.join(base, *parts)
    return posixpath.join(base.rstrip("/"), *(p.strip("/") for p in parts))
