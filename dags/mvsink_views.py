"""One Airflow DAG per view file in dags/views/ (wiring only: see mvsink.airflow.dag_factory)."""

from pathlib import Path

from mvsink.airflow.dag_factory import build_dags

build_dags(globals(), views_dir=Path(__file__).parent / "views")
