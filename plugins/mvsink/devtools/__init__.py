"""Developer tools: the demo and a local Airflow on 127.0.0.1."""
