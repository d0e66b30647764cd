"""mvsink's Airflow UI plugin: a "Materialized views" page in the navigation and a "View" tab on each DAG.

- :mod:`.airflow_plugin`: the ``AirflowPlugin`` (the only module here that imports Airflow at import time)
- :mod:`.app`: the FastAPI app the api-server serves under ``/mvsink`` (auth, routes)
- :mod:`.render`: the HTML pages (pure; they render what ``mvsink.readers.overview`` computed), with
  :mod:`.charts` (the inline SVG charts), :mod:`.assets` (the stylesheet, the script, the page shell) and
  :mod:`.common` (escaping, relative times)
- :mod:`.runs`: what Airflow's database says of the views' runs (last run, errors, last dry run, paused)

See docs/ui.md.
"""

URL_PREFIX = "/mvsink"  # where the api-server mounts the app
NAV_ROUTE = "materialized-views"  # the navigation page: <airflow>/plugin/materialized-views
VIEW_TAB_ROUTE = "mvsink-view"  # the DAG tab: <airflow>/dags/<dag_id>/plugin/mvsink-view
