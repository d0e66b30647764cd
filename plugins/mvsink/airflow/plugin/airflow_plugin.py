"""The ``AirflowPlugin`` of mvsink's UI: a "Materialized views" page in the navigation and a "View" tab on each DAG.

Registered two ways (docs/ui.md): through the ``airflow.plugins`` entry point of the installed package
(``mvsink = mvsink.airflow.plugin.airflow_plugin:MvsinkPlugin``), and, when the repository's ``plugins/`` folder is
Airflow's plugins folder, through ``plugins/mvsink_airflow_plugin.py`` (which defers to the entry point
when the package is installed with it, so the plugin never registers twice).

This module is imported by every Airflow process that loads plugins (scheduler, workers, each task):
it stays small, and the FastAPI app (:mod:`mvsink.airflow.plugin.app`) is built at its first request.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from mvsink.airflow.plugin import NAV_ROUTE, URL_PREFIX, VIEW_TAB_ROUTE
from mvsink.airflow.timetable import MvsinkTimetable

# a small table glyph for the navigation (a data: URI: nothing is fetched)
ICON = (
    "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAyNCAy"
    "NCIgZmlsbD0ibm9uZSIgc3Ryb2tlPSIjNjg3NjhhIiBzdHJva2Utd2lkdGg9IjIiPjxyZWN0IHg9IjMiIHk9IjQiIHdpZHRoPSIxOCIg"
    "aGVpZ2h0PSIxNiIgcng9IjIiLz48cGF0aCBkPSJNMyAxMGgxOE05IDEwdjEwIi8+PC9zdmc+"
)


class LazyApp:
    """An ASGI app that builds the FastAPI app at its first request (only the api-server ever serves it)."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from mvsink.airflow.plugin.app import create_app

            self._app = create_app()
        await self._app(scope, receive, send)


class MvsinkPlugin(AirflowPlugin):
    name = "mvsink"
    # the timetable of every/at schedules: the scheduler finds it here when it deserializes a view's DAG
    timetables = [MvsinkTimetable]
    fastapi_apps = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "mvsink: materialized views"}]
    external_views = [
        # hrefs are relative: the UI resolves them against its base URL (works behind a base_url path too)
        {
            "name": "Materialized views",
            "href": "mvsink/",
            "destination": "nav",
            "url_route": NAV_ROUTE,
            "nav_top_level": True,
            "icon": ICON,
        },
        {
            "name": "View",
            "href": "mvsink/dags/{DAG_ID}",
            "destination": "dag",
            "url_route": VIEW_TAB_ROUTE,
            "icon": ICON,
        },
    ]
