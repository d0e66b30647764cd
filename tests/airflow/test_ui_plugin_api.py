"""Issue 14, acceptance 2: the UI plugin's endpoints, served by a real api-server (LocalAirflow on 127.0.0.1),
refuse requests without a valid token, answer 404 for views the DAG folder does not define (never reading a
path from the request), and with a token serve the same values as ``mvsink status --all --json``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mvsink.devtools.localairflow import LocalAirflow
from tests.support.airflow import migrated_home
from tests.support.refreshlog import BASE, HOUR, refresh, source, view_file

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
ROUTES = ["/mvsink/", "/mvsink/api/views", "/mvsink/dags/mv_sales", "/mvsink/api/dags/mv_sales"]
# lag and the time it was measured move between two reads; everything else must be equal
MOVING = {"lag_ms", "checked_at", "freshness"}


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    from mvsink.definitions.catalog import Catalog

    root = tmp_path_factory.mktemp("ui-api")
    data, dags = root / "data", root / "dags"
    views = dags / "views"
    views.mkdir(parents=True)
    data.mkdir()
    (dags / "mvsink_views.py").write_bytes((REPO / "dags" / "mvsink_views.py").read_bytes())
    secret = data / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT")
    import os

    os.environ["MVSINK_DATA_ROOT"] = str(data)
    try:
        source(data)
        view_file(views, "sales", extra="max_lag: 1h\n")
        view_file(views, "later", extra="max_lag: 36500d\n")
        catalog = Catalog(views)
        refresh(catalog, "sales", BASE, added=4, nbytes=2048)
        refresh(catalog, "sales", BASE + HOUR)
        refresh(catalog, "later", BASE + HOUR, added=4, nbytes=2048)
    finally:
        os.environ.pop("MVSINK_DATA_ROOT")
    af = LocalAirflow(root / "home", dags, data_root=data, migrated_home=migrated_home())
    af.start(components=("api-server", "scheduler"))  # the plugin needs no DAG processor
    try:
        yield af, views
    finally:
        af.stop()


def _get(
    af: LocalAirflow, path: str, *, token: str | None = None, cookie: str | None = None, method: str = "GET"
) -> tuple[int, str]:
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if cookie is not None:
        headers["Cookie"] = f"_token={cookie}"
    req = urllib.request.Request(af.url + path, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_every_endpoint_refuses_requests_without_a_valid_token(airflow):
    import jwt

    af, _ = airflow
    forged = jwt.encode(
        {"sub": "admin", "role": "ADMIN", "exp": int(time.time()) + 600, "iat": int(time.time())},
        "not-the-server-secret-" * 4,
        algorithm="HS512",
    )
    for path in ROUTES + ["/mvsink/dags/mv_nope", "/mvsink/api/dags/mv_nope"]:
        status, body = _get(af, path)
        assert status == 401 and "Not authenticated" in body, (path, status, body[:200])
        for bad in ("junk", forged):
            assert _get(af, path, token=bad)[0] == 403, (path, bad[:10])
            assert _get(af, path, cookie=bad)[0] == 403, (path, bad[:10])
        assert "sales" not in body


def test_unknown_views_and_paths_are_404(airflow):
    af, _ = airflow
    token = af.token()
    for path in (
        "/mvsink/dags/mv_nope",
        "/mvsink/api/dags/mv_nope",
        "/mvsink/dags/sales",  # not mv_<view>
        "/mvsink/dags/mv_..%2F..%2Fdata%2Fsecret.txt",
        "/mvsink/dags/mv_%2Fetc%2Fpasswd",
        "/mvsink/api/dags/mv_..%2Fsecret",
        "/mvsink/dags/mv_SALES",
        "/mvsink/dags/mv_sales%00",
        "/mvsink/dags/mv_" + "a" * 70,
        "/mvsink/../etc/passwd",
        "/mvsink/views/..%2F..%2Fetc",
    ):
        status, body = _get(af, path, token=token)
        assert status == 404, (path, status, body[:300])
        assert "TOP-SECRET" not in body and "root:" not in body
    # read-only: nothing but GET (the pages' Refresh and Dry run buttons post to Airflow's own trigger endpoint)
    for path in ROUTES:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert _get(af, path, token=token, method=method)[0] == 405, (path, method)


def test_the_pages_content_security_policy(airflow):
    """Scripts only with the response's nonce, nothing fetched from elsewhere, requests only to Airflow's own
    origin (the trigger buttons), no forms, framed by Airflow only."""
    af, _ = airflow
    for path in ("/mvsink/", "/mvsink/dags/mv_sales", "/mvsink/dags/mv_nope"):
        req = urllib.request.Request(af.url + path, headers={"Authorization": f"Bearer {af.token()}"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                headers, body = r.headers, r.read().decode()
        except urllib.error.HTTPError as e:  # the 404 page carries the same headers
            headers, body = e.headers, e.read().decode()
        csp = dict(d.strip().split(" ", 1) for d in headers["Content-Security-Policy"].split(";"))
        nonce = csp["script-src"].removeprefix("'nonce-").removesuffix("'")
        assert f'<script nonce="{nonce}">' in body and body.count("<script") == 1, path
        assert csp == {
            "default-src": "'none'",
            "style-src": "'unsafe-inline'",
            "script-src": f"'nonce-{nonce}'",
            "img-src": "'self' data:",
            "connect-src": "'self'",
            "frame-ancestors": "'self'",
            "base-uri": "'none'",
            "form-action": "'none'",
        }, (path, csp)
        assert headers["X-Content-Type-Options"] == "nosniff" and headers["Cache-Control"] == "no-store"


def test_with_a_token_the_values_are_the_status_commands(airflow):
    af, views = airflow
    token = af.token()
    status, body = _get(af, "/mvsink/api/views", token=token)
    assert status == 200, body[:500]
    page = json.loads(body)
    cli = subprocess.run(
        [sys.executable, "-m", "mvsink", "status", "--all", "--json", "--views-dir", str(views)],
        env=af.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 1, cli.stderr  # sales is stale
    expected = json.loads(cli.stdout)
    assert [{k: v for k, v in r.items() if k not in MOVING} for r in page] == [
        {k: v for k, v in r.items() if k not in MOVING} for r in expected
    ]
    by = {r["view"]: r for r in page}
    assert by["sales"]["stale"] is True and by["later"]["stale"] is False
    assert abs(by["sales"]["lag_ms"] - {r["view"]: r for r in expected}["sales"]["lag_ms"]) < 120_000
    # the pages: HTML with the same values, by bearer token or by the UI's session cookie
    status, html = _get(af, "/mvsink/", token=token)
    assert status == 200 and 'data-view="sales"' in html and 'data-view="later"' in html
    assert f'data-col="upper" data-value="{by["sales"]["upper"]}"' in html
    status, html = _get(af, "/mvsink/dags/mv_sales", cookie=token)
    assert status == 200 and html.count('<g class="refresh"') == 2, html[:500]
    status, detail = _get(af, "/mvsink/api/dags/mv_sales", token=token)
    assert status == 200 and [h["version"] for h in json.loads(detail)["history"]][-1] == by["sales"]["version"]


def test_the_plugin_is_registered_without_import_errors(airflow):
    af, _ = airflow
    status, body = af.api("GET", "/api/v2/plugins", token=af.token())
    assert status == 200
    (plugin,) = [p for p in body["plugins"] if p["name"] == "mvsink"]
    assert [(v["name"], v["destination"], v["href"]) for v in plugin["external_views"]] == [
        ("Materialized views", "nav", "mvsink/"),
        ("View", "dag", "mvsink/dags/{DAG_ID}"),
    ]
    status, errors = af.api("GET", "/api/v2/plugins/importErrors", token=af.token())
    assert status == 200 and errors["import_errors"] == [], errors
