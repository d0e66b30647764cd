"""View files: parsing and validating them, and the catalog of one folder (no Spark, no Airflow)."""
