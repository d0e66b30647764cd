#!/usr/bin/env bash
# Entrypoint of the mvsink image: derives the settings that depend on the container or on
# secrets given separately, then runs the service's command.
set -euo pipefail

# Airflow's metadata database URL, built from the POSTGRES_* variables with the password
# URL-encoded (any character works), unless AIRFLOW__DATABASE__SQL_ALCHEMY_CONN is given.
if [[ -z "${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:-}" && -n "${POSTGRES_PASSWORD:-}" ]]; then
  AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="$(python - <<'PY'
import os
from urllib.parse import quote

e = os.environ
user = quote(e.get("POSTGRES_USER", "airflow"), safe="")
password = quote(e["POSTGRES_PASSWORD"], safe="")
host, port, db = e.get("POSTGRES_HOST", "postgres"), e.get("POSTGRES_PORT", "5432"), e.get("POSTGRES_DB", "airflow")
print(f"postgresql+psycopg2://{user}:{password}@{host}:{port}/{db}")
PY
)"
  export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN
fi

# Spark processes (spark-submit drivers started by Airflow tasks, the worker) advertise this
# container's address on the compose network, not loopback, so that the other side can
# connect back. Set SPARK_LOCAL_IP yourself to override.
if [[ -z "${SPARK_LOCAL_IP:-}" ]]; then
  SPARK_LOCAL_IP="$(python -c 'import socket; print(socket.gethostbyname(socket.gethostname()))')"
  export SPARK_LOCAL_IP
fi

exec "$@"
