"""The project's tests, by layer: unit/, spark/, airflow/, e2e/; shared helpers in support/."""
