"""Signed HTTP requests to S3 and Azure Blob (AWS Signature Version 4, Shared Key), for what delta-rs and
pyarrow do not ask: whether a store honours put-if-absent (:mod:`mvsink.core.probe`) and whether a bucket
or container exists (:func:`mvsink.core.storage.check_container`). Knows nothing of locations: callers pass
the options and a :class:`Target`."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import hmac
import http.client
from base64 import b64decode, b64encode
from email.utils import formatdate
from urllib.parse import quote, urlsplit


@dataclasses.dataclass(frozen=True)
class Target:
    """The bucket or container a request is about: its name, the Azure account named in the location, and
    the Azure emulator's blob endpoint (used when ``AZURE_STORAGE_USE_EMULATOR`` is on)."""

    bucket: str
    account: str = ""
    emulator_url: str = "http://127.0.0.1:10000"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def request(
    scheme: str, netloc: str, path: str, headers: dict[str, str], body: bytes, method: str = "PUT"
) -> tuple[int, str]:
    conn_cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(netloc, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        text = resp.read()[:2000].decode(errors="replace")
        return int(resp.status), text
    finally:
        conn.close()


def _sign(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def s3_request(
    opts: dict[str, str], loc: Target, key: str, method: str, body: bytes, extra: dict[str, str]
) -> tuple[int, str]:
    """A request on ``key`` of the bucket (the bucket itself for ``key == ""``), signed with SigV4."""
    region = opts.get("AWS_REGION") or "us-east-1"
    endpoint = opts.get("AWS_ENDPOINT_URL") or f"https://s3.{region}.amazonaws.com"
    parts = urlsplit(endpoint)
    scheme, netloc = parts.scheme or "https", parts.netloc or endpoint
    if _truthy(opts.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST")) or "AWS_ENDPOINT_URL" not in opts:
        host, path = f"{loc.bucket}.{netloc}", "/" + quote(key, safe="/-_.~")
    else:
        host, path = netloc, f"/{loc.bucket}/" + quote(key, safe="/-_.~")
    if not key:
        path = path.rstrip("/") or "/"
    now = dt.datetime.now(dt.UTC)
    amz_date, date = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": host, **extra, "x-amz-content-sha256": payload, "x-amz-date": amz_date}
    if opts.get("AWS_SESSION_TOKEN"):
        headers["x-amz-security-token"] = opts["AWS_SESSION_TOKEN"]
    names = sorted(headers)
    signed = ";".join(names)
    canonical = "\n".join([method, path, "", "".join(f"{n}:{headers[n]}\n" for n in names), signed, payload])
    scope = f"{date}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    k = _sign(("AWS4" + opts.get("AWS_SECRET_ACCESS_KEY", "")).encode(), date)
    for part in (region, "s3", "aws4_request"):
        k = _sign(k, part)
    signature = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={opts['AWS_ACCESS_KEY_ID']}/{scope}, SignedHeaders={signed}, "
        f"Signature={signature}"
    )
    return request(scheme, host, path, headers, body, method)


def azure_endpoint(opts: dict[str, str], loc: Target) -> tuple[str, str, str]:
    """(scheme, host, path prefix) of the blob endpoint: the emulator's path-style URL, else the account's."""
    account = opts.get("AZURE_STORAGE_ACCOUNT_NAME") or loc.account
    if _truthy(opts.get("AZURE_STORAGE_USE_EMULATOR")):
        parts = urlsplit(loc.emulator_url)
        return parts.scheme or "http", parts.netloc, parts.path.rstrip("/") or f"/{account}"
    return "https", f"{account}.blob.core.windows.net", ""


def container_status(opts: dict[str, str], loc: Target, *, kind: str) -> tuple[int, str]:
    """Ask the store about the bucket or container (signed, as the probe): (HTTP status, the start of the
    answer); (0, "") where it cannot sign (no static key) and so cannot ask."""
    try:
        if kind == "s3" and opts.get("AWS_ACCESS_KEY_ID"):
            return s3_request(opts, loc, "", "HEAD", b"", {})
        if kind == "azure" and opts.get("AZURE_STORAGE_ACCOUNT_KEY"):
            return azure_container_request(opts, loc, "GET")
    except OSError:
        return 0, ""  # unreachable: the request that follows says so
    return 0, ""


def azure_container_request(opts: dict[str, str], loc: Target, method: str) -> tuple[int, str]:
    """``GET`` (does it exist?) or ``PUT`` (create it) on the container, signed with the account's Shared Key."""
    account = opts.get("AZURE_STORAGE_ACCOUNT_NAME") or loc.account
    scheme, host, prefix = azure_endpoint(opts, loc)
    path = f"{prefix}/{loc.bucket}"
    headers = {"x-ms-date": formatdate(usegmt=True), "x-ms-version": "2021-08-06"}
    canon_headers = "".join(f"{n}:{headers[n]}\n" for n in sorted(headers))
    fields = [method, "", "", "", "", "", "", "", "", "", "", ""]
    to_sign = "\n".join(fields) + "\n" + canon_headers + f"/{account}{path}\nrestype:container"
    digest = hmac.new(b64decode(opts["AZURE_STORAGE_ACCOUNT_KEY"]), to_sign.encode(), hashlib.sha256).digest()
    if method == "PUT":
        headers["Content-Length"] = "0"
    headers["Authorization"] = f"SharedKey {account}:{b64encode(digest).decode()}"
    return request(scheme, host, path + "?restype=container", headers, b"", method)
