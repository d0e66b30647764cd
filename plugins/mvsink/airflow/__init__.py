"""The Airflow integration: one DAG per view, task bodies, run params, the write operator, the UI plugin."""
