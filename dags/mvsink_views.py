"""One Airflow DAG per view file in dags/views/ (wiring only: see mvsink.dags)."""

from pathlib import Path

from mvsink.dags import build_dags

build_dags(globals(), views_dir=Path(__file__).parent / "views")
