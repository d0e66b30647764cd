"""The put-if-absent probe: refuse a store where compare_and_append would not be safe.

delta-rs commits version ``N + 1`` by creating its commit file only if it does not exist
(S3: ``PUT`` with ``If-None-Match: *``; Azure: the same header). A store that ignores the
condition lets two racing commits both "succeed", the second silently replacing the first:
a lost commit. delta-rs re-reads the log just before it commits, so two commits made one after
the other never show it; only a true race would, which a probe cannot stage reliably. The probe
therefore asks the store directly: it creates a probe object twice with the conditional header,
through a small signed request (SigV4 for S3, Shared Key for Azure), and the second create must
be refused. Local disk passes without a probe; so does a store the probe cannot sign for when it is
the cloud's own service (AWS S3, Azure Blob, GCS all honour the condition). The result is cached per
location in the process.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from base64 import b64decode, b64encode
from typing import TYPE_CHECKING
from urllib.parse import quote

from mvsink.core import storage
from mvsink.exceptions import MvSinkError, StoreError, UnsafeStoreError
from mvsink.location import Location, Where, parse

if TYPE_CHECKING:
    from mvsink.core import storehttp

log = logging.getLogger(__name__)

PROBE_PREFIX = "_mvsink_probe_"
_probed: dict[str, bool] = {}


def check_conditional_writes(where: Where) -> None:
    """Raise :class:`UnsafeStoreError` if the store of a location accepts a second create of the same key
    (a missing bucket or refused credentials: the bad-input errors of :mod:`mvsink.core.storage`)."""
    loc = parse(where)
    uri = loc.uri
    if loc.is_local or _probed.get(loc.uri):
        return
    opts = storage.delta_options(loc) or {}
    import uuid

    key = "/".join(p for p in (loc.key, f"{PROBE_PREFIX}{uuid.uuid4().hex}") if p)
    if loc.kind == "s3":
        put = _s3_put if opts.get("AWS_ACCESS_KEY_ID") else None
        native = "AWS_ENDPOINT_URL" not in opts
    elif loc.kind == "azure":
        put = _azure_put if opts.get("AZURE_STORAGE_ACCOUNT_KEY") else None
        native = not storage.truthy(opts.get("AZURE_STORAGE_USE_EMULATOR"))
    else:
        put, native = None, True
    if put is None:
        if not native:
            raise UnsafeStoreError(
                f"location {uri}: cannot probe the store's conditional writes without a static access key, and it "
                "is not the cloud's own service. Fix: set the access key variables (AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or AZURE_STORAGE_ACCOUNT_KEY) for the location."
            )
        log.info("location %s: %s's own service honours conditional writes; not probed", uri, loc.kind)
        _probed[loc.uri] = True
        return
    first = 0
    try:
        first = put(opts, loc, key)
        second = put(opts, loc, key) if 200 <= first < 300 else first
    except OSError as exc:
        raise StoreError(
            f"location {uri}: probing the store's conditional writes failed: {type(exc).__name__}: "
            f"{storage.scrub(str(exc), loc)}. Fix: check the store is reachable, then retry."
        ) from exc
    finally:
        if 200 <= first < 300:
            try:
                storage.delete_file(loc.container().joinpath(key))
            except (StoreError, MvSinkError) as exc:
                log.warning("location %s: could not remove the probe object: %s", uri, exc)
    if first == 404:
        raise storage.missing_bucket(loc)
    if first in (401, 403):
        raise storage.access_denied(loc, f"HTTP {first} on a probe write")
    if not 200 <= first < 300:
        raise StoreError(
            f"location {uri}: the store refused a probe write (HTTP {first}). Fix: check the credentials allow "
            "writing there, then retry."
        )
    if 200 <= second < 300:
        from mvsink.core import storehttp

        where = (
            opts.get("AWS_ENDPOINT_URL", "s3") if loc.kind == "s3" else storehttp.azure_endpoint(opts, _target(loc))[1]
        )
        raise UnsafeStoreError(
            f"location {uri}: the {loc.kind} store at {where} accepted a second create of the same key "
            f"(If-None-Match: * ignored, HTTP {second}): it has no conditional writes, so two concurrent refreshes "
            "could both commit the same Delta version and one commit would be silently lost. Fix: use a store "
            "with conditional writes (AWS S3, SeaweedFS, MinIO, Azure Blob/ADLS, GCS), or configure a locking "
            "provider for delta-rs (AWS_S3_LOCKING_PROVIDER=dynamodb with DELTA_DYNAMO_TABLE_NAME)."
        )
    log.info("location %s: the store refuses a second create of a key (HTTP %d): conditional writes hold", uri, second)
    _probed[loc.uri] = True


def _s3_put(opts: dict[str, str], loc: Location, key: str) -> int:
    """PUT ``key`` with ``If-None-Match: *``, signed with AWS Signature Version 4; the HTTP status."""
    from mvsink.core import storehttp

    return storehttp.s3_request(opts, _target(loc), key, "PUT", b"mvsink put-if-absent probe", {"if-none-match": "*"})[
        0
    ]


def _azure_put(opts: dict[str, str], loc: Location, key: str) -> int:
    """Put Blob ``key`` with ``If-None-Match: *``, signed with the account's Shared Key; the HTTP status."""
    from email.utils import formatdate

    from mvsink.core import storehttp

    account = opts.get("AZURE_STORAGE_ACCOUNT_NAME") or loc.account
    scheme, host, prefix = storehttp.azure_endpoint(opts, _target(loc))
    path = f"{prefix}/{loc.bucket}/" + quote(key, safe="/-_.~")
    body = b"mvsink put-if-absent probe"
    headers = {
        "x-ms-blob-type": "BlockBlob",
        "x-ms-date": formatdate(usegmt=True),
        "x-ms-version": "2021-08-06",
    }
    canon_headers = "".join(f"{n}:{headers[n]}\n" for n in sorted(headers))
    fields = ["PUT", "", "", str(len(body)), "", "", "", "", "", "*", "", ""]
    to_sign = "\n".join(fields) + "\n" + canon_headers + f"/{account}{path}"
    digest = hmac.new(b64decode(opts["AZURE_STORAGE_ACCOUNT_KEY"]), to_sign.encode(), hashlib.sha256).digest()
    headers["If-None-Match"] = "*"
    headers["Content-Length"] = str(len(body))
    headers["Authorization"] = f"SharedKey {account}:{b64encode(digest).decode()}"
    return storehttp.request(scheme, host, path, headers, body)[0]


def create_container(where: Where) -> int:
    """Create the Azure container of a location (Shared Key; for tests against the emulator); the HTTP status
    (201 created, 409 already there)."""
    from mvsink.core import storehttp

    loc = parse(where)
    opts = storage.delta_options(loc) or {}
    return storehttp.azure_container_request(opts, _target(loc), "PUT")[0]


def _target(loc: Location) -> storehttp.Target:
    from mvsink.core import storehttp

    return storehttp.Target(bucket=loc.bucket, account=loc.account, emulator_url=storage.emulator_url(loc))
