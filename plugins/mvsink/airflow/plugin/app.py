"""The UI plugin's FastAPI app, served by Airflow's api-server under ``/mvsink``.

Routes (every one read-only, every one authenticated with Airflow's own auth manager; anything but GET: 405):

- ``GET /mvsink/``                     the "Materialized views" page (``?sort=COLUMN&order=asc|desc``)
- ``GET /mvsink/dags/{dag_id}``        a view's tab (the DAG page's "View" tab points here; its runs:
                                        ``?state=queued|running|success|failed&page=N``)
- ``GET /mvsink/api/views``            the overview as JSON (the same rows as ``mvsink status --all --json``)
- ``GET /mvsink/api/dags/{dag_id}``    a view's detail as JSON

Authentication: Airflow mounts a plugin app with ``app.mount()``, which inherits none of the core API's
dependencies, so every route here declares Airflow's own security dependencies
(``airflow.api_fastapi.core_api.security``): a request without a valid token (``Authorization: Bearer``
or the UI's ``_token`` cookie) is refused with 401 (none or expired) or 403 (invalid), and a view's page
also needs read access to its DAG (``requires_access_dag("GET")``, the auth manager decides). The
overview lists only the views whose DAGs the user may read.

The view tab's controls (issue 39: **Pause**/**Resume**, **Refresh at** a chosen time, **Backfill** a range) add
no route either: the page's script calls Airflow's own ``PATCH /api/v2/dags/{dag_id}``, ``POST .../dagRuns`` and
``POST /api/v2/backfills`` in the same way, after the person confirms in the page.

The pages' **Refresh** and **Dry run** buttons add no route here: the page's script posts to Airflow's own
trigger endpoint (``POST /api/v2/dags/{dag_id}/dagRuns``, JSON, the UI's session cookie), so Airflow's auth,
permission check (``POST`` on the DAG's runs) and CSRF defences apply exactly as to its own trigger button: the
JWT cookie is ``SameSite=Lax`` (not sent by cross-site POSTs) and the endpoint takes only JSON bodies (a
cross-site form cannot send one; a cross-origin script needs a CORS preflight Airflow does not grant). The
pages' CSP allows that one kind of request: ``connect-src 'self'``. Whether the user may trigger is asked of
the auth manager only to disable the buttons (:func:`triggerable`); Airflow decides on the request itself.

Only the views of the DAG folder's views folder are read (``$MVSINK_VIEWS_DIR``, else
``<dags_folder>/views``). A request names a DAG id, which must be ``mv_<name>`` of a view defined
there (else 404); no path is ever taken from a request.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the route functions' annotations
# (Request, the auth dependencies) at run time.
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mvsink import settings
from mvsink.airflow.dag_factory import DAG_PREFIX, dag_id_for
from mvsink.airflow.plugin import URL_PREFIX, render
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.view import NAME_RE
from mvsink.exceptions import MvSinkError
from mvsink.readers.freshness import now_ms
from mvsink.readers.overview import all_views, view_detail

if TYPE_CHECKING:
    from fastapi.responses import HTMLResponse


def views_dir() -> Path:
    """The views folder the DAG file builds its DAGs from: ``$MVSINK_VIEWS_DIR``, else ``<dags_folder>/views``."""
    env = settings.views_dir_if_set()
    if env is not None:
        return env
    from airflow.configuration import conf

    return Path(conf.get("core", "dags_folder")) / "views"


def view_name_of(dag_id: str) -> str | None:
    """The view name of a DAG id ``mv_<name>`` (a syntactically valid view name), else None."""
    if not dag_id.startswith(DAG_PREFIX):
        return None
    name = dag_id[len(DAG_PREFIX) :]
    return name if NAME_RE.match(name) else None


def links(request: Any) -> render.Links:
    """Links back into Airflow and within this app, from the request's mount point."""
    root = request.scope.get("root_path", "") or ""  # e.g. "/mvsink", or "/airflow/mvsink" behind a base_url
    base = root[: -len(URL_PREFIX)] if root.endswith(URL_PREFIX) else ""
    return render.Links(airflow_root=base + "/", app_root=base + URL_PREFIX + "/")


def readable_views(user: Any, catalog: Catalog) -> set[str] | None:
    """Names of the views whose DAGs the user may read; None: every view (access to all DAGs)."""
    from airflow.api_fastapi.app import get_auth_manager

    am = get_auth_manager()
    if am.is_authorized_dag(method="GET", user=user):
        return None
    allowed = am.get_authorized_dag_ids(user=user, method="GET")
    return {n for n in catalog.views if dag_id_for(n) in allowed}


def overview_rows(user: Any) -> tuple[list[dict[str, Any]], str, int]:
    """The overview's rows (the views the user may read), the views folder, and the time they describe."""
    now = now_ms()
    try:
        catalog = Catalog(views_dir())
    except MvSinkError as exc:  # no views folder: say so on the page
        return [{"view": None, "file": str(views_dir()), "error": str(exc)}], str(views_dir()), now
    allowed = readable_views(user, catalog)
    if allowed is not None:  # hide what the user may not read, broken view files included
        catalog.views = {n: v for n, v in catalog.views.items() if n in allowed}
        catalog.errors = {}
    return all_views(catalog, now=now), str(catalog.views_dir), now


def triggerable(user: Any, dag_ids: list[str]) -> set[str]:
    """The DAG ids whose runs the user may trigger (``POST`` on the DAG's runs, as Airflow's trigger endpoint
    requires); only to disable the buttons: Airflow checks the trigger request itself."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    am = get_auth_manager()
    out = set()
    for dag_id in dag_ids:
        try:
            if am.is_authorized_dag(
                method="POST", access_entity=DagAccessEntity.RUN, details=DagDetails(id=dag_id), user=user
            ):
                out.add(dag_id)
        except Exception:  # the auth manager could not say: leave the button on, Airflow decides on the request
            out.add(dag_id)
    return out


def pausable(user: Any, dag_id: str) -> bool:
    """Whether the user may pause / resume the DAG (``PUT`` on it, as Airflow's ``PATCH dags/<dag_id>`` requires);
    only to disable the button: Airflow checks the request itself."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    try:
        return bool(get_auth_manager().is_authorized_dag(method="PUT", details=DagDetails(id=dag_id), user=user))
    except Exception:  # the auth manager could not say: leave the button on, Airflow decides on the request
        return True


def data_sample(dag_id: str) -> dict[str, Any]:
    """The view's schema and first rows (:func:`mvsink.readers.sample.view_sample`); ``{"error"}`` when unreadable."""
    from mvsink.readers.sample import view_sample

    name = view_name_of(dag_id)
    try:
        catalog = Catalog(views_dir())
        return view_sample(catalog.views[name or ""])
    except (MvSinkError, KeyError, OSError) as exc:
        return {"error": str(exc)}


def airflow_runs(dag_ids: list[str], now: int) -> dict[str, dict[str, Any]]:
    """Airflow's last run (and last dry run) of each DAG; empty if the metadata database cannot be read (the
    page still shows what the Delta logs say)."""
    from mvsink.airflow.plugin.runs import last_runs

    try:
        return last_runs(dag_ids, now=now)
    except Exception:  # the page must not fail on Airflow's database: it only adds the run state
        import logging

        logging.getLogger(__name__).warning("mvsink page: cannot read the views' runs", exc_info=True)
        return {}


def airflow_history(dag_id: str, d: dict[str, Any], *, now: int, state: str, page: int) -> dict[str, Any]:
    """A page of the DAG's runs joined with the view's commits (:func:`mvsink.airflow.plugin.runs.run_history`);
    ``{"error": ...}`` if Airflow's database cannot be read (the rest of the page still shows)."""
    from mvsink.airflow.plugin.runs import run_history

    try:
        return run_history(dag_id, now=now, commits=d.get("last_commits") or [], state=state, page=page)
    except Exception as exc:  # the page must not fail on Airflow's database
        import logging

        logging.getLogger(__name__).warning("mvsink page: cannot read the runs of %s", dag_id, exc_info=True)
        return {"error": str(exc)}


def failures_24h(dag_ids: list[str], now: int) -> dict[str, int] | None:
    """Failed runs per DAG over the last 24 hours (None if Airflow's database cannot be read)."""
    from mvsink.airflow.plugin.runs import DAY_MS, failures_since

    try:
        return failures_since(dag_ids, since=now - DAY_MS)
    except Exception:
        import logging

        logging.getLogger(__name__).warning("mvsink page: cannot count the views' failed runs", exc_info=True)
        return None


def detail(dag_id: str) -> tuple[dict[str, Any] | None, str]:
    """A view's page data by its DAG id, or (None, why it is not a view of the folder)."""
    name = view_name_of(dag_id)
    try:
        catalog = Catalog(views_dir())
    except MvSinkError as exc:
        return None, str(exc)
    if name is None or name not in catalog.views:
        return None, (
            f"DAG {dag_id!r} is not a materialized view of the views folder {catalog.views_dir} "
            "(its views' DAGs are named mv_<view name>)."
        )
    return view_detail(catalog.views[name], catalog.views, now=now_ms()), ""


def html(body: str, nonce: str, status: int = 200) -> "HTMLResponse":
    """An HTML response with a strict Content-Security-Policy (scripts only with this response's nonce)."""
    from fastapi.responses import HTMLResponse

    return HTMLResponse(
        body,
        status_code=status,
        headers={
            "Content-Security-Policy": (
                f"default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-{nonce}'; "
                "img-src 'self' data:; connect-src 'self'; frame-ancestors 'self'; base-uri 'none'; "
                "form-action 'none'"
            ),
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
            "Referrer-Policy": "same-origin",
        },
    )


def create_app() -> Any:
    from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
    from fastapi import Depends, FastAPI, HTTPException, Request
    from fastapi.responses import HTMLResponse, JSONResponse

    app = FastAPI(title="mvsink: materialized views", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    def overview_page(request: Request, user: GetUserDep, sort: str = "view", order: str = "asc") -> HTMLResponse:
        rows, folder, now = overview_rows(user)
        nonce = secrets.token_urlsafe(16)
        dag_ids = [dag_id_for(r["view"]) for r in rows if r.get("view") and not r.get("error")]
        runs = airflow_runs(dag_ids, now)
        return html(
            render.overview_page(
                rows,
                links=links(request),
                nonce=nonce,
                sort=sort,
                order=order,
                now=now,
                views_dir=folder,
                runs=runs,
                can_trigger=triggerable(user, dag_ids),
                failures=failures_24h(dag_ids, now),
            ),
            nonce,
        )

    @app.get("/api/views")
    def overview_json(user: GetUserDep) -> JSONResponse:
        rows, _, _ = overview_rows(user)
        return JSONResponse(rows, headers={"Cache-Control": "no-store"})

    @app.get("/dags/{dag_id}", response_class=HTMLResponse, dependencies=[Depends(requires_access_dag("GET"))])
    def view_page(request: Request, dag_id: str, user: GetUserDep, state: str = "", page: str = "1") -> HTMLResponse:
        d, why = detail(dag_id)
        nonce = secrets.token_urlsafe(16)
        if d is None:
            return html(render.not_found_page(why, links=links(request), nonce=nonce), nonce, status=404)
        now = now_ms()
        runs = airflow_runs([dag_id], now).get(dag_id)
        body = render.view_page(
            d,
            links=links(request),
            nonce=nonce,
            runs=runs,
            can_trigger=dag_id in triggerable(user, [dag_id]),
            history=airflow_history(dag_id, d, now=now, state=state, page=int(page) if page.isdigit() else 1),
            sample=data_sample(dag_id),
            can_pause=pausable(user, dag_id),
        )
        return html(body, nonce)

    @app.get("/api/dags/{dag_id}", dependencies=[Depends(requires_access_dag("GET"))])
    def view_json(dag_id: str) -> JSONResponse:
        d, why = detail(dag_id)
        if d is None:
            raise HTTPException(status_code=404, detail=why)
        return JSONResponse(d, headers={"Cache-Control": "no-store"})

    return app
