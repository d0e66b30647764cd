"""Real Airflow: DagBag, ``airflow dags test``, a running api-server + scheduler, the UI (marker ``airflow``)."""
