"""Pure logic: no Spark session, no Airflow process (marker ``unit``)."""
