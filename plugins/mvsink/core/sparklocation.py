"""Spark's view of a location: the URI Hadoop reads it by and the Hadoop settings that reach it.

``s3://`` is ``s3a://``; Azure is ``abfss://container@account.dfs.core.windows.net/...`` (``abfs://``, plain
http, on the emulator). The settings carry the credentials explicitly, scoped to the bucket or account, so
views on different stores can share one Spark session; secret settings reach Spark only through
:func:`mvsink.spark.conf.split_secret_conf` or a session's runtime settings.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from mvsink.core.storage import delta_options, emulator_url, options, truthy
from mvsink.exceptions import StoreError
from mvsink.location import Location, Where, parse

#: Azure's DFS host suffix: Spark's ABFS driver names an account by it.
DFS_SUFFIX = "dfs.core.windows.net"


def _azure_account(loc: Location) -> str:
    account = (options(loc).get("AZURE_STORAGE_ACCOUNT_NAME") or loc.account or "").strip()
    if not account:
        raise StoreError(
            f"location {loc.uri}: Spark reads Azure through abfss://container@account.{DFS_SUFFIX}/..., "
            "and no account is known. Fix: set AZURE_STORAGE_ACCOUNT_NAME, or write the location as abfss://."
        )
    return account


def _emulated(loc: Location) -> bool:
    return loc.kind == "azure" and truthy(options(loc).get("AZURE_STORAGE_USE_EMULATOR"))


def spark_uri(where: Where) -> str:
    """The URI Spark (Hadoop) reads a location by: ``s3://`` is ``s3a://``; Azure is
    ``abfss://container@account.dfs.core.windows.net/...`` (``abfs://``, plain http, on the emulator);
    local paths and ``gs://`` stay as they are."""
    loc = parse(where)
    if loc.kind == "s3":
        return f"s3a://{loc.bucket}/{loc.key}" if loc.key else f"s3a://{loc.bucket}"
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
    loc = parse(where)
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
            conf[b + "path.style.access"] = str(not truthy(opts.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST"))).lower()
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
