"""Where a view's locations may be: inside the data root, or under an allowed location.

Relative paths resolve against the data root: ``MVSINK_DATA_ROOT`` if set, else the folder that holds the
view file. Every source and target must lie inside the data root once resolved (``..`` and symbolic links
followed), or under one of the prefixes of ``MVSINK_ALLOWED_LOCATIONS``; ``MVSINK_ALLOW_OUTSIDE_DATA_ROOT=1``
allows any location. A location on object storage must lie under an allowed prefix. URIs are parsed by
:func:`mvsink.location.parse`, the one URI parser.
"""

from __future__ import annotations

import os
from pathlib import Path

from mvsink import settings
from mvsink.definitions.view import ALLOW_OUTSIDE_ENV, ALLOWED_ENV, DATA_ROOT_ENV
from mvsink.exceptions import StoreError, UnsafePathError
from mvsink.location import SCHEMES, Location, is_uri, parse, scheme_of


def data_root_for(view_file: Path) -> Path:
    """The data root of a view file: ``MVSINK_DATA_ROOT`` if set, else the file's folder."""
    return settings.data_root() or view_file.parent.resolve()


def outside_data_root_allowed() -> bool:
    """True if ``MVSINK_ALLOW_OUTSIDE_DATA_ROOT`` lets view paths leave the data root."""
    return settings.allow_outside_data_root()


def _resolve_path(value: str, root: Path) -> str:
    p = Path(os.path.expandvars(value)).expanduser()
    return str((p if p.is_absolute() else root / p).resolve())


def _uri_location(raw: str, *, file: str, view: str, field: str) -> Location | None:
    """A location on object storage, parsed (``s3a://`` as ``s3://``, no trailing ``/``); None for a local path
    (``file://`` URIs included: their path is returned by :func:`_local_part`)."""
    text = raw.strip()
    scheme = scheme_of(text)
    if not scheme or scheme == "file":
        return None
    if scheme not in SCHEMES:
        raise UnsafePathError(
            f"view file {file}: field '{field}': view {view}: {raw!r} has the scheme {scheme}://, which mvsink "
            "cannot reach. Fix: use a local path, file://, s3://, s3a://, az://, abfs[s]:// or gs://."
        )
    rest = text.split("://", 1)[1].strip("/")
    if not rest or any(seg in (".", "..") for seg in rest.split("/")):
        raise UnsafePathError(
            f"view file {file}: field '{field}': view {view}: {raw!r} is not a plain location (no bucket, or '.'/'..' "
            "in it). Fix: write scheme://bucket/path/to/table."
        )
    return parse(text)


def _local_part(raw: str) -> str:
    text = raw.strip()
    return "/" + text.split("://", 1)[1].lstrip("/") if scheme_of(text) == "file" else raw


def _under(location: str, prefix: str) -> bool:
    """``location`` is ``prefix`` or below it (whole path segments)."""
    p = prefix.rstrip("/")
    return location == p or location.startswith(p + "/")


def _allowed_prefixes() -> tuple[list[str], list[Path]]:
    """``MVSINK_ALLOWED_LOCATIONS`` split into URI prefixes (canonical) and local folders (resolved)."""
    uris, paths = [], []
    for item in settings.allowed_locations():
        if is_uri(item) and scheme_of(item) != "file":
            try:
                uris.append(parse(item).uri)
            except StoreError:  # a scheme mvsink cannot reach: no location is under it
                uris.append(item.rstrip("/"))
        else:
            paths.append(Path(_local_part(item)).expanduser().resolve())
    return uris, paths


def contained(raw: str, root: Path, *, file: str, view: str, field: str) -> Location:
    """``raw`` resolved against the data root, if it stays inside it or under an allowed location (or the option
    allows any location)."""
    if "\x00" in raw:
        raise UnsafePathError(
            f"view file {file}: field '{field}': view {view}: path {raw!r} holds a NUL byte. Fix: write a plain path."
        )
    loc = _uri_location(raw, file=file, view=view, field=field)
    uri_prefixes, path_prefixes = _allowed_prefixes()
    if loc is not None:
        if outside_data_root_allowed() or any(_under(loc.uri, p) for p in uri_prefixes):
            return loc
        raise UnsafePathError(
            f"view file {file}: field '{field}': view {view}: location {raw!r} is not under an allowed location "
            f"({', '.join(uri_prefixes) or f'{ALLOWED_ENV} is unset'}). Fix: add its bucket or a prefix of it to "
            f"{ALLOWED_ENV} (comma-separated, e.g. {ALLOWED_ENV}=s3://lake/), or correct the location."
        )
    resolved = _resolve_path(_local_part(raw), root)
    if (
        outside_data_root_allowed()
        or Path(resolved).is_relative_to(root.resolve())
        or any(Path(resolved).is_relative_to(p) for p in path_prefixes)
    ):
        return parse(resolved)
    raise UnsafePathError(
        f"view file {file}: field '{field}': view {view}: path {raw!r} resolves to {resolved}, outside the data "
        f"root {root.resolve()}. Fix: use a path inside the data root (relative paths resolve against it; "
        f"'..' may not leave it), point {DATA_ROOT_ENV} at a folder that holds it, add a folder that holds it to "
        f"{ALLOWED_ENV}, or set {ALLOW_OUTSIDE_ENV}=1 to allow paths outside the data root."
    )
